/// RFC 8188 §2.1's header of an `aes128gcm` body, as RFC 8291 §4 constrains it for Web Push: salt (16) ‖
/// rs (uint32) ‖ idlen (uint8) ‖ keyid (idlen), the keyid the application server's uncompressed P-256
/// point, followed by exactly one record. Read without any cryptography: what a push service that does
/// not decrypt can check of every message.
struct SimulatorRecordHeader: Sendable, Hashable {
    struct Failure: Error, CustomStringConvertible, Equatable {
        let description: String
        init(_ description: String) { self.description = description }
    }

    var salt: ArraySlice<UInt8>
    var recordSize: Int
    /// The application server's public key (65 bytes, `0x04 ‖ x ‖ y`); its curve membership is checked
    /// only by whoever decrypts.
    var serverPublicKey: ArraySlice<UInt8>
    /// The one record: ciphertext ‖ 16-byte tag.
    var record: ArraySlice<UInt8>

    init(parsing body: [UInt8]) throws(Failure) {
        guard body.count >= 21 else { throw Failure("body shorter than the aes128gcm header") }
        let recordSize = body[16..<20].reduce(0) { $0 << 8 | Int($1) }
        let idLength = Int(body[20])
        guard recordSize >= 18 else { throw Failure("record size \(recordSize) below 18") }
        // RFC 8291 §4: the keyid is the application server's uncompressed public key.
        guard idLength == 65, body.count >= 21 + idLength, body[21] == 0x04 else {
            throw Failure("keyid must be the 65-byte application server key (idlen \(idLength))")
        }
        let record = body[(21 + idLength)...]
        guard !record.isEmpty else { throw Failure("no record") }
        // Web Push messages are one record (RFC 8291 §4: "a push message MUST include ... a single record").
        guard record.count <= recordSize else { throw Failure("more than one record") }
        guard record.count >= 17 else { throw Failure("record shorter than its tag") }
        self.salt = body[0..<16]
        self.recordSize = recordSize
        self.serverPublicKey = body[21..<(21 + idLength)]
        self.record = record
    }
}
