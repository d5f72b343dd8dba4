//! Record formats of Kafka keys and values: decoding payloads into Arrow batches and encoding
//! rows into payloads.
