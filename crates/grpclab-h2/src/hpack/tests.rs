//! RFC 7541 Appendix C examples, and round trips through our encoder.

use super::*;

fn hex(text: &str) -> Vec<u8> {
    let digits: String = text.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
        .collect()
}

fn decode_all(decoder: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    decoder
        .decode(block, |name, value| {
            fields.push((
                String::from_utf8(name.to_vec()).unwrap(),
                String::from_utf8(value.to_vec()).unwrap(),
            ))
        })
        .unwrap();
    fields
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn c_1_integers() {
    let mut out = Vec::new();
    encode_integer(10, 5, 0, &mut out);
    assert_eq!(out, [0x0a]);
    out.clear();
    encode_integer(1337, 5, 0, &mut out);
    assert_eq!(out, [0x1f, 0x9a, 0x0a]);
    let mut at = 0;
    assert_eq!(decode_integer(&out, &mut at, 5), Ok(1337));
    out.clear();
    encode_integer(42, 8, 0, &mut out);
    assert_eq!(out, [0x2a]);
    let mut at = 0;
    assert_eq!(
        decode_integer(&[0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], &mut at, 5),
        Err(HpackError::IntegerOverflow)
    );
}

const C3_REQUESTS: [&str; 3] = [
    "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
    "8286 84be 5808 6e6f 2d63 6163 6865",
    "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
];

const C4_REQUESTS: [&str; 3] = [
    "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
    "8286 84be 5886 a8eb 1064 9cbf",
    "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
];

fn expected_requests() -> [Vec<(String, String)>; 3] {
    [
        pairs(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
        ]),
        pairs(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
            ("cache-control", "no-cache"),
        ]),
        pairs(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ]),
    ]
}

#[test]
fn c_3_and_c_4_requests_with_and_without_huffman() {
    for blocks in [C3_REQUESTS, C4_REQUESTS] {
        let mut decoder = Decoder::new(4096);
        for (block, expected) in blocks.iter().zip(expected_requests()) {
            assert_eq!(decode_all(&mut decoder, &hex(block)), expected);
        }
        // After C.x.3 the table holds custom-key, cache-control, :authority: 164 bytes.
        assert_eq!(decoder.table().len(), 3);
        assert_eq!(decoder.table().size(), 164);
    }
}

const C5_RESPONSES: [&str; 3] = [
    "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
    "4803 3330 37c1 c0bf",
    "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
];

const C6_RESPONSES: [&str; 3] = [
    "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
    "4883 640e ffc1 c0bf",
    "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
];

#[test]
fn c_5_and_c_6_responses_with_eviction() {
    let date1 = "Mon, 21 Oct 2013 20:13:21 GMT";
    let date2 = "Mon, 21 Oct 2013 20:13:22 GMT";
    let location = "https://www.example.com";
    let cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
    let expected = [
        pairs(&[
            (":status", "302"),
            ("cache-control", "private"),
            ("date", date1),
            ("location", location),
        ]),
        pairs(&[
            (":status", "307"),
            ("cache-control", "private"),
            ("date", date1),
            ("location", location),
        ]),
        pairs(&[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", date2),
            ("location", location),
            ("content-encoding", "gzip"),
            ("set-cookie", cookie),
        ]),
    ];
    for blocks in [C5_RESPONSES, C6_RESPONSES] {
        // The examples use a 256-byte table, so entries are evicted along the way.
        let mut decoder = Decoder::new(256);
        for (block, fields) in blocks.iter().zip(expected.iter()) {
            assert_eq!(&decode_all(&mut decoder, &hex(block)), fields);
        }
        assert_eq!(decoder.table().size(), 215);
        assert_eq!(decoder.table().len(), 3);
    }
}

#[test]
fn encoder_indexes_repeated_fields_and_round_trips() {
    let mut encoder = Encoder::default();
    let mut decoder = Decoder::new(4096);
    let fields = [
        (":status", "200", Indexing::Incremental),
        ("content-type", "application/grpc", Indexing::Incremental),
        ("grpc-message", "a varying message", Indexing::Without),
        ("authorization", "secret", Indexing::Never),
    ];
    let mut sizes = Vec::new();
    for _ in 0..2 {
        let mut block = Vec::new();
        encoder.begin_block(&mut block);
        for (name, value, indexing) in fields {
            encoder.field(name.as_bytes(), value.as_bytes(), indexing, &mut block);
        }
        let decoded = decode_all(&mut decoder, &block);
        assert_eq!(decoded, pairs(&fields.map(|(n, v, _)| (n, v))));
        sizes.push(block.len());
    }
    // The second block indexes :status (static) and content-type (dynamic): 2 bytes for them.
    assert!(sizes[1] < sizes[0], "{sizes:?}");
    assert_eq!(decoder.table().len(), 1, "only content-type was added");
}

#[test]
fn malformed_blocks_are_errors() {
    let mut decoder = Decoder::new(4096);
    assert_eq!(
        decoder.decode(&[0x80], |_, _| {}),
        Err(HpackError::InvalidIndex(0))
    );
    assert_eq!(
        decoder.decode(&[0xff, 0x7f], |_, _| {}),
        Err(HpackError::InvalidIndex(254))
    );
    assert_eq!(
        decoder.decode(&[0x40, 0x05, b'a'], |_, _| {}),
        Err(HpackError::Truncated)
    );
    // A size update above our advertised maximum, and one after a field.
    assert_eq!(
        decoder.decode(&[0x3f, 0xe2, 0x1f], |_, _| {}),
        Err(HpackError::InvalidTableSizeUpdate)
    );
    assert_eq!(
        decoder.decode(&[0x82, 0x20], |_, _| {}),
        Err(HpackError::InvalidTableSizeUpdate)
    );
}

#[test]
fn per_call_literals_decode_and_leave_both_tables_as_they_were() {
    let mut encoder = Encoder::new(4096);
    let mut decoder = Decoder::new(4096);
    let mut block = Vec::new();
    encoder.begin_block(&mut block);
    encoder.field(b"x-kept", b"same", Indexing::Incremental, &mut block);
    let generation = encoder.generation();
    // A long value: its length needs more than the 7-bit prefix.
    let long = "v".repeat(300);
    literal_unindexed(b"x-request-id", long.as_bytes(), &mut block);
    literal_unindexed(b"x-n", b"", &mut block);
    assert_eq!(
        encoder.generation(),
        generation,
        "the encoder's table is unchanged"
    );
    assert_eq!(
        decode_all(&mut decoder, &block),
        pairs(&[("x-kept", "same"), ("x-request-id", &long), ("x-n", "")])
    );
    // The decoder's table holds only the indexed field: the next block refers to it by index.
    let mut next = Vec::new();
    encoder.begin_block(&mut next);
    encoder.field(b"x-kept", b"same", Indexing::Incremental, &mut next);
    assert_eq!(next, [0xbe], "index 62: the only dynamic entry");
    assert_eq!(
        decode_all(&mut decoder, &next),
        pairs(&[("x-kept", "same")])
    );
}
