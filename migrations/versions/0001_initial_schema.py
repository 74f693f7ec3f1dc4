"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('evaluation',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('policy', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('family', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('split', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('simulator', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('n_tasks', sa.Integer(), nullable=False),
    sa.Column('n_trajectories', sa.Integer(), nullable=False),
    sa.Column('metrics', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_evaluation'))
    )
    with op.batch_alter_table('evaluation', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_evaluation_policy'), ['policy'], unique=False)

    op.create_table('task',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('family', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('split', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('problem_description', sa.Text(), nullable=False),
    sa.Column('ground_truth', sa.Text(), nullable=False),
    sa.Column('hidden_information', sa.Text(), nullable=True),
    sa.Column('test_cases', sa.JSON(), nullable=False),
    sa.Column('naive_solution', sa.Text(), nullable=True),
    sa.Column('extra', sa.JSON(), nullable=True),
    sa.Column('content_hash', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_task')),
    sa.UniqueConstraint('content_hash', name=op.f('uq_task_content_hash'))
    )
    with op.batch_alter_table('task', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_task_family'), ['family'], unique=False)
        batch_op.create_index(batch_op.f('ix_task_split'), ['split'], unique=False)

    op.create_table('training_run',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('base_model', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('parent_checkpoint_id', sa.Integer(), nullable=True),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('metrics', sa.JSON(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('data_watermark', sa.Integer(), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_training_run'))
    )
    with op.batch_alter_table('training_run', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_training_run_kind'), ['kind'], unique=False)
        batch_op.create_index(batch_op.f('ix_training_run_parent_checkpoint_id'), ['parent_checkpoint_id'],
                              unique=False)

    op.create_table('checkpoint',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('base_model', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('path', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('adapter', sa.Boolean(), nullable=False),
    sa.Column('step', sa.Integer(), nullable=False),
    sa.Column('sha256', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('metrics', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['training_run.id'], name=op.f('fk_checkpoint_run_id_training_run')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_checkpoint'))
    )
    with op.batch_alter_table('checkpoint', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_checkpoint_run_id'), ['run_id'], unique=False)

    op.create_table('trajectory',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('policy', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('simulator', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('setting', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('sample_index', sa.Integer(), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=True),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('failure', sa.Text(), nullable=True),
    sa.Column('answer', sa.Text(), nullable=True),
    sa.Column('reward', sa.Float(), nullable=True),
    sa.Column('success', sa.Boolean(), nullable=True),
    sa.Column('graded_seq', sa.Integer(), nullable=True),
    sa.Column('content_hash', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('worker', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
    sa.ForeignKeyConstraint(['task_id'], ['task.id'], name=op.f('fk_trajectory_task_id_task')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_trajectory')),
    sa.UniqueConstraint('content_hash', name=op.f('uq_trajectory_content_hash')),
    sa.UniqueConstraint('graded_seq', name=op.f('uq_trajectory_graded_seq')),
    sa.UniqueConstraint('task_id', 'policy', 'simulator', 'setting', 'sample_index',
                        name=op.f('uq_trajectory_task_id_policy_simulator_setting_sample_index'))
    )
    with op.batch_alter_table('trajectory', schema=None) as batch_op:
        batch_op.create_index('ix_trajectory_status_policy', ['status', 'policy'], unique=False)
        batch_op.create_index(batch_op.f('ix_trajectory_task_id'), ['task_id'], unique=False)

    op.create_table('test_result',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('trajectory_id', sa.Integer(), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('call', sa.Text(), nullable=False),
    sa.Column('expected', sa.Text(), nullable=True),
    sa.Column('actual', sa.Text(), nullable=True),
    sa.Column('passed', sa.Boolean(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('duration_s', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['trajectory_id'], ['trajectory.id'], name=op.f('fk_test_result_trajectory_id_trajectory')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_test_result')),
    sa.UniqueConstraint('trajectory_id', 'name', name=op.f('uq_test_result_trajectory_id_name'))
    )
    with op.batch_alter_table('test_result', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_test_result_trajectory_id'), ['trajectory_id'], unique=False)

    op.create_table('turn',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('trajectory_id', sa.Integer(), nullable=False),
    sa.Column('index', sa.Integer(), nullable=False),
    sa.Column('role', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('raw', sa.Text(), nullable=True),
    sa.Column('prompt', sa.Text(), nullable=True),
    sa.Column('prompt_shared', sa.Integer(), nullable=True),
    sa.Column('prompt_tokens', sa.Integer(), nullable=True),
    sa.Column('completion_tokens', sa.Integer(), nullable=True),
    sa.Column('logprob_sum', sa.Float(), nullable=True),
    sa.Column('logprob_mean', sa.Float(), nullable=True),
    sa.Column('latency_s', sa.Float(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
    sa.ForeignKeyConstraint(['trajectory_id'], ['trajectory.id'], name=op.f('fk_turn_trajectory_id_trajectory')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_turn')),
    sa.UniqueConstraint('trajectory_id', 'index', name=op.f('uq_turn_trajectory_id_index'))
    )
    with op.batch_alter_table('turn', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_turn_trajectory_id'), ['trajectory_id'], unique=False)

    op.create_table('critic_score',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('turn_id', sa.Integer(), nullable=False),
    sa.Column('checkpoint_id', sa.Integer(), nullable=False),
    sa.Column('score', sa.Float(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
    sa.ForeignKeyConstraint(['checkpoint_id'], ['checkpoint.id'],
                            name=op.f('fk_critic_score_checkpoint_id_checkpoint')),
    sa.ForeignKeyConstraint(['turn_id'], ['turn.id'], name=op.f('fk_critic_score_turn_id_turn')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_critic_score')),
    sa.UniqueConstraint('turn_id', 'checkpoint_id', name=op.f('uq_critic_score_turn_id_checkpoint_id'))
    )
    with op.batch_alter_table('critic_score', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_critic_score_checkpoint_id'), ['checkpoint_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_critic_score_turn_id'), ['turn_id'], unique=False)

    op.create_table('lineage',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('trajectory_id', sa.Integer(), nullable=False),
    sa.Column('turn_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['training_run.id'], name=op.f('fk_lineage_run_id_training_run')),
    sa.ForeignKeyConstraint(['trajectory_id'], ['trajectory.id'], name=op.f('fk_lineage_trajectory_id_trajectory')),
    sa.ForeignKeyConstraint(['turn_id'], ['turn.id'], name=op.f('fk_lineage_turn_id_turn')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lineage'))
    )
    with op.batch_alter_table('lineage', schema=None) as batch_op:
        batch_op.create_index('ix_lineage_run_trajectory', ['run_id', 'trajectory_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_lineage_trajectory_id'), ['trajectory_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('lineage', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_lineage_trajectory_id'))
        batch_op.drop_index('ix_lineage_run_trajectory')

    op.drop_table('lineage')
    with op.batch_alter_table('critic_score', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_critic_score_turn_id'))
        batch_op.drop_index(batch_op.f('ix_critic_score_checkpoint_id'))

    op.drop_table('critic_score')
    with op.batch_alter_table('turn', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_turn_trajectory_id'))

    op.drop_table('turn')
    with op.batch_alter_table('test_result', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_test_result_trajectory_id'))

    op.drop_table('test_result')
    with op.batch_alter_table('trajectory', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_trajectory_task_id'))
        batch_op.drop_index('ix_trajectory_status_policy')

    op.drop_table('trajectory')
    with op.batch_alter_table('checkpoint', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_checkpoint_run_id'))

    op.drop_table('checkpoint')
    with op.batch_alter_table('training_run', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_training_run_parent_checkpoint_id'))
        batch_op.drop_index(batch_op.f('ix_training_run_kind'))

    op.drop_table('training_run')
    with op.batch_alter_table('task', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_task_split'))
        batch_op.drop_index(batch_op.f('ix_task_family'))

    op.drop_table('task')
    with op.batch_alter_table('evaluation', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_evaluation_policy'))

    op.drop_table('evaluation')
