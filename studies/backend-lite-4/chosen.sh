# The fresh2 reads (scripts/lite_study_4.sh final), in order, one per line: an arm as `lite_study_4.sh arm` names it
# (or rft: the starting point alone), then what else its read takes. Chosen by the plan's rules from the committed
# lite-val figures (plan.md, amendment 4; tests/test_study.py checks them against the report):
#   baseline (rule 2): grpo 34.6% and rft-2 34.6% (166 of 480 each), a tie: rft-2.
#   primary pair (rule 3): grpo+credit against rft-2, each at training seeds 0 and 1.
# grpo+credit goes first: it is read in the session that trained it where it can be (amendment 4).
final_reads="
grpo+credit
rft-2
grpo+credit --trainer-seed 1
rft-2 --trainer-seed 1
rft
"
