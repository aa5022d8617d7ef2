/**
 * Decoder options from a conformance manifest's `decoder` object (SPEC.md §14).
 *
 * @module
 */

import type { DecoderOptions } from './decoder.js';

/** A manifest `decoder` object (SPEC.md §14): snake_case names, every field optional. */
export interface ManifestDecoder {
  max_frame_payload?: number;
  max_message_size?: number;
  request_key?: string | null;
  max_stream_bytes?: number;
  max_messages?: number;
  max_keepalives_in_a_row?: number;
  max_ignorable_in_a_row?: number;
  max_sse_comments_in_a_row?: number;
  max_event_data?: number;
}

/** Decoder options from a manifest `decoder` object. */
export function optionsFromManifest(config: ManifestDecoder | null | undefined): DecoderOptions {
  const c = config ?? {};
  const options: DecoderOptions = { requestKey: c.request_key ?? null };
  const set = <K extends keyof DecoderOptions>(key: K, value: DecoderOptions[K] | undefined): void => {
    if (value !== undefined) {
      options[key] = value;
    }
  };
  set('maxFramePayload', c.max_frame_payload);
  set('maxMessageSize', c.max_message_size);
  set('maxStreamBytes', c.max_stream_bytes);
  set('maxMessages', c.max_messages);
  set('maxKeepalivesInARow', c.max_keepalives_in_a_row);
  set('maxIgnorableInARow', c.max_ignorable_in_a_row);
  set('maxSseCommentsInARow', c.max_sse_comments_in_a_row);
  set('maxEventData', c.max_event_data);
  return options;
}

