"""3. One turn: utterance -> ASR -> streamed LLM -> clause splitter -> TTS -> line-rate audio."""
