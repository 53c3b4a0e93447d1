"""Everything that runs on anyio, in rooms by concern: the actor kernel (mailbox, replies,
locks) here at the root; ``context/``, ``roles/``, ``team/``, ``intake/``, ``models/`` and
``telemetry/`` beside it."""
