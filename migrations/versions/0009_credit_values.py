"""Every value a turn credit gave (colbench credit eval), so that a stopped evaluation goes on where it stopped

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'credit_value',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('credit_key', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('credit', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('turn_id', sa.Integer(), nullable=False),
        sa.Column('candidate', sa.Integer(), nullable=False),
        sa.Column('value', sa.Float(), nullable=True),
        sa.Column('seconds', sa.Float(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'),
                  nullable=False),
        sa.ForeignKeyConstraint(['turn_id'], ['turn.id'], name=op.f('fk_credit_value_turn_id_turn')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_credit_value')),
        sa.UniqueConstraint('credit_key', 'turn_id', 'candidate',
                            name=op.f('uq_credit_value_credit_key_turn_id_candidate')),
    )
    with op.batch_alter_table('credit_value', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_credit_value_credit_key'), ['credit_key'], unique=False)
        batch_op.create_index(batch_op.f('ix_credit_value_turn_id'), ['turn_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('credit_value', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_credit_value_turn_id'))
        batch_op.drop_index(batch_op.f('ix_credit_value_credit_key'))
    op.drop_table('credit_value')
