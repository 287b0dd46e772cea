import GRDB
package import PushgateCore

/// The 64-bit integer the SQLite store indexes a device by (`device.token_key`, schema v7), in place of
/// `UNIQUE (app, token)`.
///
/// Why: a registration inserts a random 64-hex-digit token into the token index. As text that index holds
/// about 80 bytes an entry (130,000 leaves, 500 MiB at 5,000,000 devices), so nearly every registration
/// reads one uncached leaf and dirties it, and the commit and the checkpoint write it back. An integer
/// entry takes about 18 bytes: four times fewer leaves, most of them cached (docs/benchmarks.md, issue
/// #12 item 4).
///
/// The key is not unique: two devices may share one. A lookup is always `token_key = ? AND app = ? AND
/// token = ?` (the index finds the few rows with that key, the row's own columns decide), and the one
/// writer keeps `(app, token)` unique by looking a device up before inserting it, in the same
/// transaction (every write transaction is IMMEDIATE, so other processes on the file wait).
///
/// The function is fixed and written down here, because keys are stored: it must give the same number on
/// every platform and in every process (not Swift's `Hasher`, which is seeded per process).
/// 1. FNV-1a, 64 bits (offset basis 0xcbf29ce484222325, prime 0x100000001b3), over the UTF-8 bytes of the
///    app, one 0 byte, and the token's `DeviceToken.registryIdentity` (its `storageKey`: hex for APNs,
///    `fcm:` + token for FCM; for Web Push `webpush:` + the endpoint, without the keys, so that a browser
///    subscribing again with new keys finds its device by the key of its endpoint);
/// 2. MurmurHash3's 64-bit finaliser (`fmix64`), so that every bit depends on every byte;
/// 3. shifted right by one: 63 bits, then masked to ``bits`` (63 in production; fewer only in tests, to
///    force collisions);
/// 4. APNs: that number (>= 0); FCM: that number with the sign bit set (< 0). An app's FCM devices are
///    thus the range `token_key < 0` of the index (``fcmDevicesSQL``), as they were the range
///    `['fcm:', 'fcm;')` of the text index before v7.
///
/// The same function is registered on every connection as the SQL function `pushgate_token_key(app,
/// token)` (``sqlFunction``): migration v7 fills the column with it, and the ledger's joins from
/// `request_token` to `device` compute the key of each token with it.
package struct TokenKey: Sendable, Equatable {
    /// How many low bits of the 63-bit hash are kept.
    package let bits: Int

    /// The production key: all 63 bits.
    package static let standard = TokenKey(bits: 63)

    /// A narrowed key, for tests only: with few bits, different tokens share keys.
    package init(bits: Int) {
        precondition((0...63).contains(bits), "a token key keeps 0 to 63 bits")
        self.bits = bits
    }

    /// The SQL function's name.
    package static let sqlName = "pushgate_token_key"

    /// An app's FCM devices, in `token_key` order: a range of the key index, then the app on the row.
    package static let fcmDevicesSQL = "SELECT id, token FROM device WHERE token_key < 0 AND app = ? ORDER BY token_key"

    package func callAsFunction(app: String, storageKey: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in app.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        hash = hash &* 0x100_0000_01b3  // the 0 byte between app and token: XOR with 0 changes nothing
        for byte in DeviceToken.registryIdentity(ofStorageKey: storageKey).utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        hash ^= hash >> 33
        hash = hash &* 0xff51_afd7_ed55_8ccd
        hash ^= hash >> 33
        hash = hash &* 0xc4ce_b9fe_1a85_ec53
        hash ^= hash >> 33
        let mask: UInt64 = bits == 63 ? (1 << 63) - 1 : (1 << UInt64(bits)) - 1
        let kept = (hash >> 1) & mask
        let isFCM = storageKey.utf8.starts(with: DeviceToken.fcmStoragePrefix.utf8)
        return Int64(bitPattern: isFCM ? kept | (1 << 63) : kept)
    }

    package func callAsFunction(app: String, token: DeviceToken) -> Int64 {
        self(app: app, storageKey: token.storageKey)
    }

    /// `pushgate_token_key(app, token)`: NULL if either is NULL or not text.
    var sqlFunction: DatabaseFunction {
        DatabaseFunction(Self.sqlName, argumentCount: 2, pure: true) { values in
            guard let app = String.fromDatabaseValue(values[0]), let token = String.fromDatabaseValue(values[1])
            else { return nil }
            return self(app: app, storageKey: token)
        }
    }
}
