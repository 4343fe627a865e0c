"""Real-client integration tests, the Node client project and their harness."""
