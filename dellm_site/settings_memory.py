"""Settings of distilled memory: facts about the user and thread titles (docs/subsystems/facts.md).

Imported at the end of `dellm_site.settings`; every knob is an environment variable documented in `.env.example`.
"""

from dellm_site.env import env_bool, env_choice, env_float, env_int

# Draw facts from the user's own words (typed turns, `/v1`, imports) in the worker, after the reply.
DELLM_FACTS = env_bool("DELLM_FACTS", True)
# Who draws them: `rules` (offline, deterministic), `model` (one call per message to the configured model,
# JSON-schema answers, charged to the owner's DELLM_FACTS_MODEL_RATE), or `auto`: the model when one is configured.
DELLM_FACTS_EXTRACTOR = env_choice("DELLM_FACTS_EXTRACTOR", "auto", ("auto", "rules", "model"))
# Messages one extraction pass reads (a pass enqueues the next while some are left: an import's backlog).
DELLM_FACTS_BATCH = env_int("DELLM_FACTS_BATCH", 500)
# What a fact does in a turn's context: `replace` the messages it was drawn from (it stands for them, in the
# place of the first), sit `beside` them (both compete for the k slots), or `off` (never used). `make eval`
# chose `replace` (lab/HISTORY.md, "Distilled memory").
DELLM_FACTS_CONTEXT = env_choice("DELLM_FACTS_CONTEXT", "replace", ("beside", "replace", "off"))
# A deletion's preview lists the user's other messages and facts at least this similar in meaning to what it
# matched (and the facts of the same subjects) as related information outside Dep, unticked.
DELLM_RELATED_THRESHOLD = env_float("DELLM_RELATED_THRESHOLD", 0.3)
