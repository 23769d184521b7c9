"""Post-call summary and extraction: notes on each finished call, made in the background.

:mod:`.notes` says what is asked of the LLM and reads its reply, :mod:`.job` makes one
call's notes on a scheduler worker, :mod:`.runner` finds the pending calls in the call log and
makes them when the load allows. Imports no backend: the LLM is the profile's, loaded already.
"""
