"""1. The phone line: pjsua2 user agent, SIP events, the audio link, the test caller.

The user agent is the only pjsua2 importer; nothing here knows of speech.
"""
