"""2. One call: state machine, turn-taking, endpointing, barge-in, playout, workers, records.

The same code answers SIP calls and simulated ones.
"""
