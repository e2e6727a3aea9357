"""Evaluation harness: the paper's utility and deletion experiments on our real services.

`manage.py dellm_eval` drives it. Every system runs in throwaway `eval-` users
through `chat.turns` (turns) and `provenance.deletions` (deletions), so the
numbers measure the product's own code paths.
"""
