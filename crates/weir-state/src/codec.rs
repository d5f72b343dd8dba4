//! The one value codec of keyed state: postcard.
//!
//! Values, map keys, map values, list elements and set elements are encoded with
//! [postcard](https://docs.rs/postcard) 1.x through serde. Its wire format is documented and
//! stable across postcard 1.x releases: integers are LEB128 varints (signed ones zigzag-encoded),
//! strings and sequences are a varint length followed by their items, structs are their fields in
//! declaration order with no names, enums are a varint variant index then the variant's fields.
//! The encoding of a value is deterministic as long as the value's `Serialize` is (a `HashMap`
//! or `HashSet` is not: do not use one as a map key or set element).
//!
//! Because fields are not named, adding, removing or reordering fields changes the format: bump
//! the descriptor's schema version and register a migration.

use crate::error::{StateError, StateResult};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Encodes a value of state `state` with the state codec.
///
/// # Errors
///
/// [`StateError::Codec`] when the value's `Serialize` fails (e.g. a map of unknown length).
pub fn encode<T: Serialize + ?Sized>(state: &str, value: &T) -> StateResult<Vec<u8>> {
    postcard::to_stdvec(value).map_err(|e| StateError::Codec {
        state: state.to_owned(),
        message: format!("encoding: {e}"),
    })
}

/// Decodes a value of state `state` with the state codec.
///
/// # Errors
///
/// [`StateError::Codec`] when the bytes are not a valid encoding of `T`, e.g. after a type
/// change without a schema version bump.
pub fn decode<T: DeserializeOwned>(state: &str, bytes: &[u8]) -> StateResult<T> {
    postcard::from_bytes(bytes).map_err(|e| StateError::Codec {
        state: state.to_owned(),
        message: format!("decoding {} bytes: {e}", bytes.len()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_is_pinned() {
        // u64 300 is the varint AC 02; a string is its length then its bytes.
        assert_eq!(encode("s", &300u64).ok(), Some(vec![0xAC, 0x02]));
        assert_eq!(
            encode("s", &("ab", -1i32)).ok(),
            Some(vec![2, b'a', b'b', 1])
        );
        let back: Option<(String, i32)> = decode("s", &[2, b'a', b'b', 1]).ok();
        assert_eq!(back, Some(("ab".to_owned(), -1)));
        assert!(decode::<u64>("s", &[0xFF]).is_err());
    }
}
