"""VAD stage: base interface and one module per backend."""
