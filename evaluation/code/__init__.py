"""MBPP+ / HumanEval+ scoring with EvalPlus's data in a sandbox that model-written programs can neither fool nor
escape: ``score`` (scheduling, the entry point), ``sandbox`` (the process boundary), ``compare`` (the trusted
comparison), ``truth`` (checksummed expected outputs), ``sandbox_view`` (the sandbox's root), ``agreement``
(verdicts vs EvalPlus's own)."""
