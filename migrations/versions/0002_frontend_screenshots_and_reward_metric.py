"""frontend screenshots and reward metric

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('screenshot',
    sa.Column('sha256', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('path', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('width', sa.Integer(), nullable=True),
    sa.Column('height', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
    sa.PrimaryKeyConstraint('sha256', name=op.f('pk_screenshot'))
    )
    with op.batch_alter_table('trajectory', schema=None) as batch_op:
        batch_op.add_column(sa.Column('reward_metric', sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        batch_op.add_column(sa.Column('screenshot', sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        batch_op.create_foreign_key(batch_op.f('fk_trajectory_screenshot_screenshot'), 'screenshot', ['screenshot'],
                                    ['sha256'])

    with op.batch_alter_table('turn', schema=None) as batch_op:
        batch_op.add_column(sa.Column('screenshot', sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        batch_op.create_foreign_key(batch_op.f('fk_turn_screenshot_screenshot'), 'screenshot', ['screenshot'],
                                    ['sha256'])

    # Every reward graded before this revision was a backend test fraction (imported
    # frontend rewards stay unnamed: their metric is whatever the file's producer used).
    op.execute(
        "UPDATE trajectory SET reward_metric = 'tests' WHERE reward IS NOT NULL "
        "AND task_id IN (SELECT id FROM task WHERE family = 'backend')"
    )


def downgrade() -> None:
    with op.batch_alter_table('turn', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_turn_screenshot_screenshot'), type_='foreignkey')
        batch_op.drop_column('screenshot')

    with op.batch_alter_table('trajectory', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_trajectory_screenshot_screenshot'), type_='foreignkey')
        batch_op.drop_column('screenshot')
        batch_op.drop_column('reward_metric')

    op.drop_table('screenshot')
