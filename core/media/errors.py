"""Errors of turning downloaded bytes into what the model reads.

Each message is short and fit to show the person who sent the file: it says
what went wrong with *their* file, never an API key, a URL or a stack trace.

```
GatewayError                      (storage.errors)
└── MediaProcessingError          a file was downloaded but could not be used
    ├── UnreadableMediaError      corrupt, truncated, a decompression bomb, an unknown or
    │                             unsupported type, password-protected, ...
    ├── TranscriptionError        speech-to-text failed, timed out, found no speech, or is
    │                             not installed
    ├── VisionError               the auxiliary vision model could not describe an image
    └── SpeechError               text-to-speech (a voice reply) failed, timed out, or sent
                                  back no audio
```
"""

from __future__ import annotations

from storage.errors import GatewayError


class MediaProcessingError(GatewayError):
    """A downloaded file could not be turned into something the model can read."""


class UnreadableMediaError(MediaProcessingError):
    """The bytes themselves are the problem: corrupt, truncated, too big once decoded, or of a
    type that cannot be read."""


class TranscriptionError(MediaProcessingError):
    """Speech-to-text gave no transcript: the call failed or timed out, or there was no speech."""


class VisionError(MediaProcessingError):
    """The auxiliary vision model gave no description of an image."""


class SpeechError(MediaProcessingError):
    """Text-to-speech gave no audio: nothing to say, the call failed or timed out, or the answer was no audio."""
