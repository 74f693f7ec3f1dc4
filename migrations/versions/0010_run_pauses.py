"""Training runs keep the seconds they spent stopped between a stop and a resume, so that their minutes are work

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07
"""
from alembic import op
import sqlalchemy as sa


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('training_run', schema=None) as batch_op:
        batch_op.add_column(sa.Column('paused_s', sa.Float(), nullable=False, server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('training_run', schema=None) as batch_op:
        batch_op.drop_column('paused_s')
