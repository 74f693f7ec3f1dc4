"""A store's identity (its checkpoints' folders carry it); training runs' worker and heartbeat

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""
import uuid

from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    store = op.create_table(
        'store',
        sa.Column('id', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'),
                  nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_store')),
    )
    op.bulk_insert(store, [{'id': uuid.uuid4().hex}])
    with op.batch_alter_table('training_run', schema=None) as batch_op:
        batch_op.add_column(sa.Column('worker', sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        batch_op.add_column(sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('training_run', schema=None) as batch_op:
        batch_op.drop_column('heartbeat_at')
        batch_op.drop_column('worker')
    op.drop_table('store')
