"""The glue between the phases and the tournament engine (``autodev.tournament``): what both tournaments
share and the plan tournament (``plan``), the implementation tournament of one tested task (``impl``)."""
