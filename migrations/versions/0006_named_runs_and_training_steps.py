"""Rollout runs (named, tagged; every trajectory belongs to one), training runs' names and tags,
per-step training figures

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""
from alembic import op
import sqlalchemy as sa
import sqlmodel


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'rollout_run',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('name', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column('tags', sa.JSON(), nullable=False),
        sa.Column('policy', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('simulator', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('setting', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('tasks', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('config', sa.JSON(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'),
                  nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_rollout_run')),
        sa.UniqueConstraint('name', name=op.f('uq_rollout_run_name')),
        sa.UniqueConstraint('policy', 'simulator', 'setting', 'tasks',
                            name=op.f('uq_rollout_run_policy_simulator_setting_tasks')),
    )
    op.create_table(
        'training_step',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('step', sa.Integer(), nullable=False),
        sa.Column('epoch', sa.Integer(), nullable=False),
        sa.Column('values', sa.JSON(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'),
                  nullable=False),
        sa.ForeignKeyConstraint(['run_id'], ['training_run.id'], name=op.f('fk_training_step_run_id_training_run')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_training_step')),
        sa.UniqueConstraint('run_id', 'step', name=op.f('uq_training_step_run_id_step')),
    )
    op.create_index(op.f('ix_training_step_run_id'), 'training_step', ['run_id'], unique=False)
    with op.batch_alter_table('training_run', schema=None) as batch_op:
        batch_op.add_column(sa.Column('name', sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        batch_op.add_column(sa.Column('tags', sa.JSON(), nullable=True))
        batch_op.create_unique_constraint(batch_op.f('uq_training_run_name'), ['name'])
    empty_list, empty_dict = _json_literal('[]'), _json_literal('{}')
    op.execute(f"UPDATE training_run SET tags = {empty_list}")
    with op.batch_alter_table('training_run', schema=None) as batch_op:
        batch_op.alter_column('tags', existing_type=sa.JSON(), nullable=False)
    with op.batch_alter_table('trajectory', schema=None) as batch_op:
        batch_op.add_column(sa.Column('rollout_id', sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f('ix_trajectory_rollout_id'), ['rollout_id'], unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_trajectory_rollout_id_rollout_run'), 'rollout_run', ['rollout_id'],
                                    ['id'])
    # Every stored trajectory joins the run its command would make now: one per policy,
    # simulator, setting and task set.
    op.execute(
        "INSERT INTO rollout_run (tags, policy, simulator, setting, tasks, config, created_at, updated_at) SELECT"
        f" {empty_list}, t.policy, t.simulator, t.setting, k.family || ':' || k.split, {empty_dict}, MIN(t.created_at),"
        " MAX(t.created_at) FROM trajectory t JOIN task k ON k.id = t.task_id GROUP BY t.policy, t.simulator,"
        " t.setting, k.family, k.split"
    )
    op.execute(
        "UPDATE trajectory SET rollout_id = (SELECT r.id FROM rollout_run r JOIN task k ON r.tasks = k.family || ':' ||"
        " k.split WHERE k.id = trajectory.task_id AND r.policy = trajectory.policy AND r.simulator ="
        " trajectory.simulator AND r.setting = trajectory.setting)"
    )


def _json_literal(text: str) -> str:
    # PostgreSQL will not put a text value in a json column without a cast; SQLite keeps JSON as text.
    return f"CAST('{text}' AS JSON)" if op.get_bind().dialect.name == "postgresql" else f"'{text}'"


def downgrade() -> None:
    with op.batch_alter_table('trajectory', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_trajectory_rollout_id_rollout_run'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_trajectory_rollout_id'))
        batch_op.drop_column('rollout_id')
    with op.batch_alter_table('training_run', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('uq_training_run_name'), type_='unique')
        batch_op.drop_column('tags')
        batch_op.drop_column('name')
    op.drop_index(op.f('ix_training_step_run_id'), table_name='training_step')
    op.drop_table('training_step')
    op.drop_table('rollout_run')
