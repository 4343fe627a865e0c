"""Third-party agents from PyPI with agent_meta under them (``nox -s thirdparty``)."""
