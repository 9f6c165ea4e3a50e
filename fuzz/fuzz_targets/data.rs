//! The data readers on arbitrary bytes: NumPy's `.npy` and Futhark's
//! textual and binary data formats (what `remora run --input` reads). No
//! input may panic, hang or allocate beyond the process's memory limit
//! (run with `-rss_limit_mb`); whatever reads must write back and read
//! again to the same values.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    // As `remora run` reads a data file: `.npy` by its magic, else Futhark.
    let mut npy = b"\x93NUMPY".to_vec();
    npy.extend_from_slice(bytes);
    for input in [bytes, npy.as_slice()] {
        if input.starts_with(b"\x93NUMPY") {
            if let Ok(a) = remora_value::npy::read_npy(input) {
                let written = remora_value::npy::write_npy(&a).expect("an array read from .npy writes back");
                let again = remora_value::npy::read_npy(&written).expect("written .npy reads back");
                // Compared as bytes (NaN is not equal to itself).
                let rewritten = remora_value::npy::write_npy(&again).expect("it writes again");
                assert!(rewritten == written, "an .npy round trip changed the array");
            }
        } else if let Ok(values) = remora_value::futhark::read_data(input) {
            for v in &values {
                let _ = remora_value::futhark::write_text(v);
                let _ = remora_value::futhark::write_binary(v);
            }
        }
    }
});
