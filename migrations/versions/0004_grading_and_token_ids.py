"""The grading a backend grade was made under; the sampled token ids of agent turns

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('trajectory', schema=None) as batch_op:
        batch_op.add_column(sa.Column('grading', sqlmodel.sql.sqltypes.AutoString(), nullable=True))
    with op.batch_alter_table('turn', schema=None) as batch_op:
        batch_op.add_column(sa.Column('token_ids', sa.JSON(), nullable=True))
    # Every backend grade before this revision ran the strict semantics.
    op.execute("UPDATE trajectory SET grading = 'strict' WHERE reward_metric = 'tests'")


def downgrade() -> None:
    with op.batch_alter_table('turn', schema=None) as batch_op:
        batch_op.drop_column('token_ids')
    with op.batch_alter_table('trajectory', schema=None) as batch_op:
        batch_op.drop_column('grading')
