"""Offline studies of checkpoints that call the RL loop's phases (``training.phases``), never called by it:
``analysis`` (DelTA / CF credit by token class), ``fidelity*`` (effective credit vs token importance),
``importance`` (exact, synthetic task) and ``mc_importance`` (Monte-Carlo)."""
