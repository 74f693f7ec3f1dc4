"""SWEET actor candidates and pairs

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('sweet_candidate',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('sampling_key', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('turn_id', sa.Integer(), nullable=False),
    sa.Column('index', sa.Integer(), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('token_ids', sa.JSON(), nullable=False),
    sa.Column('finish_reason', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('sampler_logp', sa.Float(), nullable=False),
    sa.Column('critic_checkpoint_id', sa.Integer(), nullable=True),
    sa.Column('critic_logp', sa.Float(), nullable=True),
    sa.Column('reference_logp', sa.Float(), nullable=True),
    sa.Column('advantage', sa.Float(), nullable=True),
    sa.Column('score', sa.Float(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
    sa.ForeignKeyConstraint(['critic_checkpoint_id'], ['checkpoint.id'],
                            name=op.f('fk_sweet_candidate_critic_checkpoint_id_checkpoint')),
    sa.ForeignKeyConstraint(['run_id'], ['training_run.id'], name=op.f('fk_sweet_candidate_run_id_training_run')),
    sa.ForeignKeyConstraint(['turn_id'], ['turn.id'], name=op.f('fk_sweet_candidate_turn_id_turn')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_sweet_candidate')),
    sa.UniqueConstraint('sampling_key', 'turn_id', 'index', name=op.f('uq_sweet_candidate_sampling_key_turn_id_index'))
    )
    with op.batch_alter_table('sweet_candidate', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sweet_candidate_run_id'), ['run_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_sweet_candidate_sampling_key'), ['sampling_key'], unique=False)
        batch_op.create_index(batch_op.f('ix_sweet_candidate_turn_id'), ['turn_id'], unique=False)

    op.create_table('sweet_pair',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('turn_id', sa.Integer(), nullable=False),
    sa.Column('chosen_id', sa.Integer(), nullable=False),
    sa.Column('rejected_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
    sa.ForeignKeyConstraint(['chosen_id'], ['sweet_candidate.id'],
                            name=op.f('fk_sweet_pair_chosen_id_sweet_candidate')),
    sa.ForeignKeyConstraint(['rejected_id'], ['sweet_candidate.id'],
                            name=op.f('fk_sweet_pair_rejected_id_sweet_candidate')),
    sa.ForeignKeyConstraint(['run_id'], ['training_run.id'], name=op.f('fk_sweet_pair_run_id_training_run')),
    sa.ForeignKeyConstraint(['turn_id'], ['turn.id'], name=op.f('fk_sweet_pair_turn_id_turn')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_sweet_pair')),
    sa.UniqueConstraint('run_id', 'chosen_id', 'rejected_id', name=op.f('uq_sweet_pair_run_id_chosen_id_rejected_id'))
    )
    with op.batch_alter_table('sweet_pair', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sweet_pair_run_id'), ['run_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_sweet_pair_turn_id'), ['turn_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('sweet_pair', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sweet_pair_turn_id'))
        batch_op.drop_index(batch_op.f('ix_sweet_pair_run_id'))

    op.drop_table('sweet_pair')
    with op.batch_alter_table('sweet_candidate', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sweet_candidate_turn_id'))
        batch_op.drop_index(batch_op.f('ix_sweet_candidate_sampling_key'))
        batch_op.drop_index(batch_op.f('ix_sweet_candidate_run_id'))

    op.drop_table('sweet_candidate')
