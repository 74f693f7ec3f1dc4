# The configuration each arm takes to the test sets (scripts/lite_study.sh final), one line per
# arm: its experiment flags. SWEET-RL's is the one it won on lite-val: lr 3e-6 with NLL weight 1
# ("small": 35.0% against the warm start's 26.7%, p 0.052; "nll1" 30.8%, "paper" not run with
# the critic, its oracle control 20.0%). The rivals were not searched on validation in time: each
# takes SWEET-RL's step and NLL weight, the setting that helped SWEET-RL, which if anything favours
# SWEET-RL's own arm (README, "The backend-lite study"). Last, the oracle-ranked control at
# SWEET-RL's setting: how much a perfect ranking gives this actor update on the test set.
final_arms="
--policy-lr 3e-6 --policy-nll-weight 1.0 --arm sweet
--policy-lr 3e-6 --policy-nll-weight 1.0 --arm rft
--policy-lr 3e-6 --policy-nll-weight 1.0 --arm mtdpo
--policy-lr 3e-6 --policy-nll-weight 1.0 --arm sweet-no-c
--policy-lr 3e-6 --policy-nll-weight 1.0 --arm sweet-oracle
"
