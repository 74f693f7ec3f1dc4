from colbench.openmp import spin_briefly

spin_briefly()  # before torch or CTranslate2 load (colbench/openmp.py)
