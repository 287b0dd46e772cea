import Foundation

/// A deterministic random number generator (SplitMix64), so that jitter is reproducible.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

/// Always returns the same value: `.max` draws the top of every jitter range, `0` the bottom.
struct ConstantGenerator: RandomNumberGenerator {
    let value: UInt64
    mutating func next() -> UInt64 { value }
}

/// A throwaway P-256 key made with `openssl ecparam -name prime256v1 -genkey` for these tests only,
/// in the three forms an auth key file may come in.
enum TestKeys {
    static let pkcs8PEM = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgoW5HpxB5PtETWvKA
        Vv98O1sC1yg2MMetv86X4WikiM+hRANCAARrB0+BwwcwVxFlNlsXlKiBXOvVEukb
        d9OzJ8q5btdXqaJ66bVi1BXRa0fwpG1CfbmAR6SUJtr7QZ3gLAnBd0q3
        -----END PRIVATE KEY-----

        """
    static let sec1PEM = """
        -----BEGIN EC PRIVATE KEY-----
        MHcCAQEEIKFuR6cQeT7RE1rygFb/fDtbAtcoNjDHrb/Ol+FopIjPoAoGCCqGSM49
        AwEHoUQDQgAEawdPgcMHMFcRZTZbF5SogVzr1RLpG3fTsyfKuW7XV6mieum1YtQV
        0WtH8KRtQn25gEeklCba+0Gd4CwJwXdKtw==
        -----END EC PRIVATE KEY-----
        """
    static let publicKeyPEM = """
        -----BEGIN PUBLIC KEY-----
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEawdPgcMHMFcRZTZbF5SogVzr1RLp
        G3fTsyfKuW7XV6mieum1YtQV0WtH8KRtQn25gEeklCba+0Gd4CwJwXdKtw==
        -----END PUBLIC KEY-----
        """
    /// Every base64 line of the private key files: none may ever show up in a description or log.
    static var privateKeyLines: [String] {
        (pkcs8PEM + "\n" + sec1PEM).split(separator: "\n").map(String.init).filter { !$0.hasPrefix("-----") }
    }
}

/// base64url (no padding) to bytes, as a JWT verifier does it.
func base64URLDecode(_ text: some StringProtocol) -> Data? {
    var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while base64.count % 4 != 0 { base64 += "=" }
    return Data(base64Encoded: base64)
}

/// Everything Swift can print about a value: description, debug description and `dump`.
func everyRendering(of value: Any) -> String {
    var dumped = ""
    dump(value, to: &dumped)
    return "\(value)\n" + String(reflecting: value) + "\n" + dumped
}

extension Date {
    static let testEpoch = Date(timeIntervalSince1970: 1_800_000_000)
}

extension Duration {
    static func minutes(_ minutes: Int) -> Duration { .seconds(minutes * 60) }
}
