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
  thresholds leave copies of the forget facts.
- **dellm** removes the fact and Dep(fact): every reply whose context held it,
  transitively. That is more messages than semantic deletion at high
  thresholds, but they are all replies derived from the fact: user messages
  have no parents in the provenance graph, so no retain fact is ever lost, and
  no copy is left.
- **Retain utility can rise after deletion** (TOFU): removing the forget
  authors' facts frees top-k context slots that near-duplicate template answers
  of those authors used to take, so some retain questions retrieve their own
  fact. Within the stated tolerance this counts as a difference, not a loss.
"""
