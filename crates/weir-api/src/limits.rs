//! Bounds on what one input record may make a reader do, shared by every connector.

/// The deepest nesting of objects and arrays a JSON record may have, as in Jackson's default
/// (which reads Flink's JSON): decoders recurse over nested values, so a record nested 50,000
/// levels deep would overflow the thread's stack and abort the process. A deeper record is a
/// bad record, handled by the source's bad-record policy like any other.
pub const MAX_JSON_DEPTH: usize = 1_000;

/// The byte offset in `json` (one JSON text) of the bracket that opens level `limit + 1`, or
/// `None` when its objects and arrays nest at most `limit` deep. Brackets inside strings do
/// not count; malformed text is scanned all the same (the decoder reports what is wrong).
pub fn json_depth_exceeds(json: &[u8], limit: usize) -> Option<usize> {
    let mut depth = 0_usize;
    let (mut in_string, mut escaped) = (false, false);
    for (at, &byte) in json.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return Some(at);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// The message of a record deeper than [`MAX_JSON_DEPTH`], its bracket at byte `at`.
pub fn json_too_deep_message(at: usize) -> String {
    format!(
        "the JSON value nests objects and arrays more than {MAX_JSON_DEPTH} levels deep (at \
         character {})",
        at + 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_objects_and_arrays_but_not_brackets_in_strings() {
        assert_eq!(json_depth_exceeds(br#"{"a": [1, {"b": 2}]}"#, 3), None);
        assert_eq!(json_depth_exceeds(br#"{"a": [1, {"b": 2}]}"#, 2), Some(10));
        assert_eq!(json_depth_exceeds(br#"{"a": "[[[[{{{{\"[[["}"#, 1), None);
        assert_eq!(json_depth_exceeds(b"[][][][]", 1), None);
        let deep = format!("{}1{}", "[".repeat(50_000), "]".repeat(50_000));
        assert_eq!(
            json_depth_exceeds(deep.as_bytes(), MAX_JSON_DEPTH),
            Some(1_000)
        );
        assert_eq!(
            json_too_deep_message(1_000),
            format!(
                "the JSON value nests objects and arrays more than 1000 levels deep (at character 1001)"
            )
        );
    }
}
