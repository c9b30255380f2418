"""The generic core of normlab's LLM tasks: sessions on the journal, the stub server and the command-line kit.

Under the naming game (``runner/``, ``probes/``), CRSEC and SCENE, above the journal and the endpoints:

- :mod:`.journaled` -- journaled sessions for runners whose every step depends on the answers
  (the journaled and scripted clients, run directories, request caps);
- :mod:`.estimate` -- :class:`~normlab.llm_runs.core.estimate.RunEstimate` (``--dry-run``) and the
  bytes-per-token rule;
- :mod:`.cli_kit` -- the shared flags, endpoint settings and error handling of the LLM commands;
- :mod:`.sync` -- running a coroutine from synchronous code (also inside Jupyter);
- :mod:`.stub` -- the OpenAI-compatible stub server with fault injection and the registry of scripted
  stand-ins (the public face: :mod:`normlab.llm_runs.testing`).

Nothing is imported here: import the modules.
"""
