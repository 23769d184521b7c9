"""Call campaigns (``callagent campaign``): a CSV's calls, paced, retried and resumable."""
