# The configuration each arm takes to the test sets (scripts/lite_study.sh final), one line per
# arm: its experiment flags, each the best of its arm on lite-val (`colbench study report`'s
# search table marks it; tests/test_study.py checks the two agree). SWEET-RL: lr 3e-6 with NLL
# weight 1 ("small": 35.0% against the warm start's 26.7%; "nll1" 30.8%, "tiny" (1e-6) 30.8%). Rejection fine-tuning:
# lr 3e-5 (45.0%; 1e-4 37.9%, 1e-5 38.3%, 3e-6 37.9%). Multi-turn DPO: tiny, lr 1e-6 (31.2%; small
# 29.2%, nll1 28.3%). SWEET-RL without c: tiny (30.4%; small 30.0%, nll1 20.4%). The oracle-ranked control at its best,
# small (30.8%; tiny 28.3%, nll1 25.0%, paper 20.0%): how much a perfect ranking gives this actor update.
# (The rivals were first read on the test sets at SWEET-RL's setting, before their own search
# ended; each was read again at its own choice as the search moved it: rejection fine-tuning at
# 1e-5, then 3e-5; multi-turn DPO and SWEET-RL without c at 1e-6. The earlier reads keep their
# own labels in trajectories.jsonl.)
final_arms="
--policy-lr 3e-6 --policy-nll-weight 1.0 --arm sweet
--policy-lr 3e-5 --arm rft
--policy-lr 1e-6 --policy-nll-weight 1.0 --arm mtdpo
--policy-lr 1e-6 --policy-nll-weight 1.0 --arm sweet-no-c
--policy-lr 3e-6 --policy-nll-weight 1.0 --arm sweet-oracle
"
