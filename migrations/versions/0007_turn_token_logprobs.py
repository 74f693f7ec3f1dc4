"""The sampler's log-prob of every sampled token of an agent turn (online RL's PPO ratio reads them)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""
from alembic import op
import sqlalchemy as sa


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('turn', schema=None) as batch_op:
        batch_op.add_column(sa.Column('token_logprobs', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('turn', schema=None) as batch_op:
        batch_op.drop_column('token_logprobs')
