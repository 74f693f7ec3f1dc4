# The final reads on lite-fresh (scripts/lite_study_3.sh final), in the plan's order, one per line: `rft FLAGS` (the
# experiment from the warm start, which reads the warm start and rft) or `round2 FLAGS` (from rft), each arm at its
# best lite-val configuration (`colbench study report`'s search table marks it; tests/test_study.py checks the two
# agree). rft goes first although the plan lists it after the primary reads: every round-2 line reads rft as its
# starting point, so its read is needed anyway, and the warm start comes with it.
#   rft: 3e-5 (its only configuration, 36.9%).
#   rft-2: 1e-5 (42.9%; 3e-5 40.0%).  The primary arm without the critic.
#   rft+sweet: (a) 3e-6 on all turns (37.5%; (b) 1e-5 33.5%, (c) questions 36.5%).  The primary critic-using arm.
#   rft+sweet-oracle: (c) 3e-6 on question turns (41.9%; (a) 39.0%, (b) 31.7%).  The control, read last.
# Both primary arms again with trainer seed 1 (their last stage retrained from rft: data order, held-out tasks,
# candidates; rft+sweet's critic too).
final_reads="
rft --arm rft --policy-lr 3e-5
round2 --arm rft --policy-lr 1e-5
round2 --arm sweet --policy-lr 3e-6 --policy-nll-weight 1.0
round2 --arm rft --policy-lr 1e-5 --trainer-seed 1
round2 --arm sweet --policy-lr 3e-6 --policy-nll-weight 1.0 --trainer-seed 1
round2 --arm sweet-oracle --policy-lr 3e-6 --policy-nll-weight 1.0 --policy-turns questions
"
