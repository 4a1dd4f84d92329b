"""The relational schema. Alembic migrations create it; this module mirrors it for queries."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()

users = Table(
    "users",
    metadata,
    Column("id", String(200), primary_key=True),
    Column("display_name", String(200), nullable=False),
    Column("email", String(320)),
    Column("avatar_url", Text),
    Column("avatar_config", JSON),
    Column("is_admin", Boolean, nullable=False, default=False),
    Column("created_at", BigInteger, nullable=False),
)

tokens = Table(
    "tokens",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("user_id", String(200), ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger),
    Column("revoked_at", BigInteger),
)

agents = Table(
    "agents",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(200), nullable=False),
    # folder_id with '' for "no folder": NULLs are distinct in unique constraints.
    Column("folder_key", String(200), nullable=False),
    Column("folder_id", String(200)),
    Column("collection_id", String(200)),
    Column("alias", Text),
    Column("description", Text, nullable=False),
    Column("type", String(200)),
    Column("mode", String(16), nullable=False),
    Column("input_mode", String(16), nullable=False),
    Column("version", Integer, nullable=False),
    Column("document", Text, nullable=False),  # the AgentSpec as JSON
    Column("is_builtin", Boolean, nullable=False, default=False),
    # The marking ids, denormalised from resource_markings (which filters) for rendering.
    Column("markings", Text, nullable=False, default="[]"),
    Column("created_by", String(200), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    UniqueConstraint("folder_key", "name", name="uq_agents_folder_name"),
    # The built-ins, which every caller's reach includes (store/sharing.py), found by index.
    Index("ix_agents_builtin", "is_builtin", "id"),
    # A list page's Markers (store/agents.py list_markers), read from the index alone.
    Index("ix_agents_markers", "id", "version", "updated_at"),
)

agent_versions = Table(
    "agent_versions",
    metadata,
    Column("agent_id", String(64), ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("document", Text, nullable=False),
    Column("created_by", String(200), nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

# Prompts, tools, actors and roles (domain/resources.py): one table for the four kinds, shaped
# like ``agents``; names are unique per (category, folder).
resources = Table(
    "resources",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("category", String(16), nullable=False),
    Column("name", String(200), nullable=False),
    Column("folder_key", String(200), nullable=False),  # folder_id, '' for none
    Column("folder_id", String(200)),
    Column("collection_id", String(200)),
    Column("alias", Text),
    Column("description", Text, nullable=False),
    Column("type", String(200)),
    Column("version", Integer, nullable=False),
    Column("document", Text, nullable=False),  # the resource's spec as JSON
    Column("is_builtin", Boolean, nullable=False, default=False),
    Column("markings", Text, nullable=False, default="[]"),  # as for agents
    Column("created_by", String(200), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    UniqueConstraint("category", "folder_key", "name", name="uq_resources_category_folder_name"),
    Index("ix_resources_category", "category", "id"),
)

resource_versions = Table(
    "resource_versions",
    metadata,
    Column(
        "resource_id", String(64), ForeignKey("resources.id", ondelete="CASCADE"), primary_key=True
    ),
    Column("version", Integer, primary_key=True),
    Column("document", Text, nullable=False),
    Column("created_by", String(200), nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

# Generic per-resource tables, keyed by resource id, so every category shares them.
resource_tags = Table(
    "resource_tags",
    metadata,
    Column("resource_id", String(64), primary_key=True),
    Column("tag", String(200), primary_key=True),
    Index("ix_resource_tags_tag", "tag", "resource_id"),
)

resource_owners = Table(
    "resource_owners",
    metadata,
    Column("resource_id", String(64), primary_key=True),
    Column("principal_id", String(200), primary_key=True),
    Index("ix_resource_owners_principal", "principal_id", "resource_id"),
)

groups = Table(
    "groups",
    metadata,
    Column("id", String(200), primary_key=True),
    Column("display_name", String(200), nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

# Members are users or groups; nesting is checked for cycles when a member is added.
group_members = Table(
    "group_members",
    metadata,
    Column("group_id", String(200), primary_key=True),
    Column("member_id", String(200), primary_key=True),
    Index("ix_group_members_member", "member_id", "group_id"),
)

resource_grants = Table(
    "resource_grants",
    metadata,
    Column("resource_id", String(64), primary_key=True),
    Column("principal_id", String(200), primary_key=True),
    Column("scope", String(16), nullable=False),  # viewer | runner | editor
    Index("ix_resource_grants_principal", "principal_id", "resource_id"),
)

markings = Table(
    "markings",
    metadata,
    Column("id", String(200), primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("description", Text, nullable=False, default=""),
    Column("created_by", String(200), nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

marking_members = Table(
    "marking_members",
    metadata,
    Column("marking_id", String(200), primary_key=True),
    Column("principal_id", String(200), primary_key=True),
    Index("ix_marking_members_principal", "principal_id", "marking_id"),
)

resource_markings = Table(
    "resource_markings",
    metadata,
    Column("resource_id", String(64), primary_key=True),
    Column("marking_id", String(200), primary_key=True),
    Index("ix_resource_markings_marking", "marking_id", "resource_id"),
)

# Where every resource sits (DESIGN.md 2.2), as a closure table: one row per resource and each
# of its containers (its folder, that folder's folders up to the top, and its collection), with
# how many levels up it is, plus the resource itself at depth 0. Inherited access and markings
# are then one join, in either direction: a resource's chain, or a container's whole subtree.
resource_ancestors = Table(
    "resource_ancestors",
    metadata,
    Column("resource_id", String(64), primary_key=True),
    Column("ancestor_id", String(64), primary_key=True),
    Column("depth", Integer, nullable=False),
    Index("ix_resource_ancestors_ancestor", "ancestor_id", "depth", "resource_id"),
)

# Every marking a resource ever carried (never removed, not even with the resource): its
# audit entries are shown only to those who hold them all (DESIGN.md 2).
marking_history = Table(
    "marking_history",
    metadata,
    Column("resource_id", String(64), primary_key=True),
    Column("marking_id", String(200), primary_key=True),
)

audit_log = Table(
    "audit_log",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", BigInteger, nullable=False),
    Column("actor_id", String(200), nullable=False),
    Column("action", String(64), nullable=False),
    Column("target_id", String(200), nullable=False),
    Column("before", JSON),
    Column("after", JSON),
    Index("ix_audit_log_target", "target_id", "id"),
    Index("ix_audit_log_actor", "actor_id", "id"),
)

# One row (id 1): bumped with every change to owners or grants, in the same transaction, so
# what a set of principals can reach may be cached under (principals, epoch).
access_epoch = Table(
    "access_epoch",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("epoch", BigInteger, nullable=False),
)

# -- runs (DESIGN.md 4) ------------------------------------------------------------------------
# A run's nullable JSON columns store SQL NULL for None (JSON's default is the JSON 'null'), so
# "IS NULL" means what it says.
_NULLABLE_JSON = JSON(none_as_null=True)

# Runs go with their agent (CASCADE): an agent's runs are reached through the agent's access,
# so runs left without one would be readable by nobody but admins.
runs = Table(
    "runs",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("agent_id", String(64), ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
    Column("agent_version", Integer, nullable=False),
    Column("user_id", String(200), nullable=False),
    Column("status", String(16), nullable=False),
    Column("waiting", _NULLABLE_JSON),  # what a waiting run waits for
    Column("inputs", JSON, nullable=False),
    Column("outputs", _NULLABLE_JSON),
    Column("error", _NULLABLE_JSON),
    Column("usage", JSON, nullable=False),
    Column("conversation_id", String(64)),
    Column("idempotency_key", String(200)),
    Column("step_count", Integer, nullable=False),
    Column("event_count", Integer, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("started_at", BigInteger),
    Column("finished_at", BigInteger),
    Column("updated_at", BigInteger, nullable=False),
    Column("lease_owner", String(200)),
    Column("lease_expires_at", BigInteger),
    # Executions that took the run up since its last saved step, and how the last one failed
    # (store/runs.py ``take``): a run at DHUB_RUN_MAX_ATTEMPTS fails instead (0017).
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("attempt_error", Text),
    # NULL keys are distinct, so runs without a key never collide.
    UniqueConstraint("agent_id", "idempotency_key", name="uq_runs_agent_idempotency"),
    Index("ix_runs_agent", "agent_id", "id"),
    Index("ix_runs_user", "user_id", "id"),
    Index("ix_runs_status", "status", "id"),
    Index("ix_runs_lease", "lease_expires_at"),
)

# One row per step: the patch from the previous state (step 0: from {}), see checkpoints.py.
run_steps = Table(
    "run_steps",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("step", Integer, primary_key=True),
    Column("patch", JSON, nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

run_events = Table(
    "run_events",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),  # 1, 2, ... per run, without gaps
    Column("type", String(64), nullable=False),
    Column("node_id", String(200)),
    Column("data", JSON, nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

run_commands = Table(
    "run_commands",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("command_id", String(200), primary_key=True),
    Column("kind", String(32), nullable=False),
    Column("node_id", String(200), nullable=False),
    Column("frame", String(200), nullable=False),
    Column("payload", JSON, nullable=False),
    Column("status", String(16), nullable=False),  # pending | done | cancelled
    # Seconds on the executor's clock (SleepUntil.at, AwaitInput.timeout_at), as the engine has it.
    Column("due_at", Float),
    Column("assignees", JSON, nullable=False),  # rendering; run_task_assignees filters
    Column("created_at", BigInteger, nullable=False),
    Column("closed_at", BigInteger),
    Index("ix_run_commands_due", "status", "kind", "due_at"),
)

# Documents a run made (a template node's render, an agent's render tool): kept with the run,
# seen by whoever may read the run (services/artifacts.py).
run_artifacts = Table(
    "run_artifacts",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("run_id", String(64), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("media_type", String(100), nullable=False),
    Column("format", String(16)),  # markdown | html | text: what it can be converted from
    Column("size", Integer, nullable=False),
    Column("content", LargeBinary, nullable=False),
    Column("node_id", String(200)),
    Column("template_id", String(64)),
    Column("template_version", Integer),
    Column("created_at", BigInteger, nullable=False),
    Column("created_by", String(200), nullable=False),
    Index("ix_run_artifacts_run", "run_id", "created_at"),
)

# What the API leaves for a run (both execution modes): a person's answer or decision, saved
# before the API acknowledges it (``command_id`` names the open task, one row per task), or a
# cancellation (distributed mode; ``command_id`` "cancel"). The process holding the run reads
# it when told or when it loads the run; a row goes with the step that consumes it or closes
# its task, or when the run ends (store/inbox.py).
run_inbox = Table(
    "run_inbox",
    metadata,
    Column("run_id", String(64), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("command_id", String(200), primary_key=True),
    Column("kind", String(16), nullable=False),  # answer | decision | cancel
    Column("payload", JSON, nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

# Worker processes of distributed mode, each beating its heart here (GET /api/v1/workers).
workers = Table(
    "workers",
    metadata,
    Column("id", String(200), primary_key=True),  # the executor's lease owner name
    Column("host", String(200), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("queues", JSON, nullable=False),
    Column("concurrency", Integer, nullable=False),
    Column("live_runs", Integer, nullable=False),  # runs in its memory at the last beat
    Column("started_at", BigInteger, nullable=False),
    Column("heartbeat_at", BigInteger, nullable=False),
    Column("stopping", Boolean, nullable=False),
)

# The assignees of a task, denormalised from run_commands.assignees so "my tasks" is an
# indexed lookup by principal on both backends (no JSON array functions).
run_task_assignees = Table(
    "run_task_assignees",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("command_id", String(200), primary_key=True),
    Column("principal_id", String(200), primary_key=True),
    ForeignKeyConstraint(
        ["run_id", "command_id"],
        ["run_commands.run_id", "run_commands.command_id"],
        ondelete="CASCADE",
    ),
    Index("ix_run_task_assignees_principal", "principal_id", "run_id", "command_id"),
)

# -- conversations (chat input mode) ------------------------------------------------------------

conversations = Table(
    "conversations",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("agent_id", String(64), ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
    Column("user_id", String(200), nullable=False),
    Column("variables", JSON, nullable=False),  # the agent's `conversations` variables
    Column("message_count", Integer, nullable=False),
    Column("turn_run_id", String(64)),  # the run of the latest turn
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    # A react agent's own transcript after the latest turn (tool calls, results, summary):
    # the next turn starts from it instead of the plain messages.
    Column("transcript", JSON),
    Index("ix_conversations_user", "user_id", "id"),
)

conversation_messages = Table(
    "conversation_messages",
    metadata,
    Column(
        "conversation_id",
        String(64),
        ForeignKey("conversations.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("seq", Integer, primary_key=True),  # 1, 2, ... per conversation
    Column("role", String(16), nullable=False),  # user | assistant
    Column("content", Text, nullable=False),
    Column("run_id", String(64)),
    Column("created_at", BigInteger, nullable=False),
)

# -- ontologies (knowledge/ontology_*.py) -------------------------------------------------------
# An ontology is a resource (category "ontology"); its objects and links go with it. Keys are
# compared byte for byte on both databases (collation "C" on PostgreSQL, set by the migration).

ontology_objects = Table(
    "ontology_objects",
    metadata,
    Column(
        "ontology_id", String(64), ForeignKey("resources.id", ondelete="CASCADE"), primary_key=True
    ),
    Column("type", String(64), primary_key=True),
    Column("key", String(200), primary_key=True),  # the primary key's value, as text
    Column("properties", JSON, nullable=False),
    Column("title", Text, nullable=False),
    Column("search_text", Text, nullable=False),  # title, key and string values, lowercased
    Column("created_by", String(200), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)

ontology_links = Table(
    "ontology_links",
    metadata,
    Column(
        "ontology_id", String(64), ForeignKey("resources.id", ondelete="CASCADE"), primary_key=True
    ),
    Column("link_type", String(64), primary_key=True),
    Column("from_key", String(200), primary_key=True),
    Column("to_key", String(200), primary_key=True),
    Column("created_by", String(200), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_ontology_links_to", "ontology_id", "link_type", "to_key", "from_key"),
)

# -- secrets (services/secrets.py) --------------------------------------------------------------
# A secret is a resource (category "secret"); its value lives here, never in its document or
# its versions: Fernet-encrypted (the key is the server's, not the database's), one row per
# secret, gone with it.

secret_values = Table(
    "secret_values",
    metadata,
    Column(
        "secret_id", String(64), ForeignKey("resources.id", ondelete="CASCADE"), primary_key=True
    ),
    Column("ciphertext", Text, nullable=False),
    Column("updated_by", String(200), nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)

# -- triggers (services/triggers.py) ------------------------------------------------------------
# Webhooks and schedules that start an agent's runs as the user who made them; a webhook's
# secret sealed as secrets' values are; each delivery or tick in the history.

triggers = Table(
    "triggers",
    metadata,
    Column("id", String(64), primary_key=True),
    Column(
        "agent_id",
        String(64),
        ForeignKey("agents.id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    Column("type", String(20), nullable=False),
    Column("document", Text, nullable=False),
    Column("secret", Text),
    Column("created_by", String(200), nullable=False),
    Column("status", String(20), nullable=False),
    Column("stopped_reason", Text),
    Column("next_fire_at", BigInteger, index=True),
    Column("last_fire_at", BigInteger),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
)

trigger_events = Table(
    "trigger_events",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("trigger_id", String(64), ForeignKey("triggers.id", ondelete="CASCADE"), nullable=False),
    Column("kind", String(20), nullable=False),
    Column("key", String(200)),
    Column("status", String(20), nullable=False),
    Column("reason", Text),
    Column("run_id", String(64)),
    Column("at", BigInteger, nullable=False),
    Index("ix_trigger_events_trigger", "trigger_id", "id"),
)
