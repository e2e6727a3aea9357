"""The report's explanation of how to read offline numbers (why they differ from the paper's)."""

NOTES = """## Reading these numbers

- **Scoring.** Without a real model, an answer is correct when its ROUGE-L
  recall of the gold answer is at least 0.5 (the gold answer's content is mostly
  in the reply). With `DELLM_LLM=openai` an LLM judge decides instead; ROUGE-L
  recall is reported either way. Probes (the questions) are soft-deleted right
  after their reply, so no question ever answers a later one.
- **The offline responder** quotes, verbatim, the one or two highest-scoring
  *user* messages of its context, and never follows instructions. It reads
  assistant replies only when fewer than two user messages are in context.
- **no_memory** has no context, hence 0 everywhere: the floor.
- **full_memory** forgets by saying "Forget this: ..." to the model. The
  offline responder cannot obey, and that message repeats the fact, so its
  forget utility stays where it was; the paper's LLM partly obeys.
- **semantic:<t>** always removes the fact itself (cosine 1 to the forget text),
  so with this responder its forget utility drops to the floor at every
  threshold. What it misses are the derived copies: replies that quoted the
  fact ("copies left"). The offline responder prefers user messages and never
  quotes them, so at high thresholds semantic deletion looks as good as DeLLM
  on utility, unlike in the paper, where the LLM reads those replies and leaks
  the fact. The storage view shows the paper's trade-off regardless of the
  responder: low thresholds destroy retain facts ("retain facts lost"), high
  thresholds leave copies of the forget facts (PF, from 0.4 up). In TOFU the
  replies quoting a fact are short and close to it in embedding space, so
  semantic:0.6-0.7 removes them too and, offline, matches DeLLM (no copy left,
  no retain fact lost, fewer messages deleted): there the paper's shape does
  not appear.
- **dellm** removes the fact and Dep(fact): every reply whose context held it,
  transitively. That is more messages than semantic deletion at high
  thresholds, but they are all replies derived from the fact: user messages
  have no parents in the provenance graph, so no retain fact is ever lost, and
  no copy is left.
- **Template overlap (TOFU).** TOFU answers share templates across authors
  ("Author X is male."), so a quoted answer of another author can reach the 0.5
  ROUGE-L recall of a forget question's gold answer. A few forget questions
  then still count as answered after deletion, for DeLLM as for any system that
  keeps other authors' facts; no_memory, which quotes nothing, stays at 0. The
  "copies left" column shows no forget fact survives, and "answers leaking"
  counts the answers after deletion that hold a lexeme (english config, as the
  lexical index makes them) only a forgotten fact had, not its question nor
  anything kept: a name, a place, a prize. DeLLM's must be 0.
- **Retain utility can move by a question** under DeLLM although no retain fact
  is lost: a reply that quoted a retain fact *and* had a forget fact in its
  context is in Dep(forget fact) and goes, and it was sometimes the message that
  answered a retain question whose own fact is not in that question's top-k.
"""
