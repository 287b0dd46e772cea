import Foundation
import PostgresNIO
import PushgateCore

extension PostgresStore {
    /// How the store talks TLS to the server, as `sslmode` in the URL says (libpq's meanings).
    public enum TLSMode: Hashable, Sendable {
        /// No TLS.
        case disable
        /// Encrypted, without checking the server's certificate.
        case require
        /// Encrypted; the certificate must chain to the trust roots (the file of CA certificates when
        /// given, `sslrootcert=FILE`, else the system's) and name the host.
        case verifyFull(rootCertificates: String?)

        /// Without `sslmode`: `verify-full` for any host that is not loopback, `disable` on loopback.
        public static func `default`(host: String) -> TLSMode {
            isLoopback(host) ? .disable : .verifyFull(rootCertificates: nil)
        }

        /// `localhost`, 127.0.0.0/8 and ::1.
        public static func isLoopback(_ host: String) -> Bool {
            let host = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
            if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
            let parts = host.split(separator: ".", omittingEmptySubsequences: false)
            return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
        }

        /// From the URL's `sslmode` and `sslrootcert` (nil when absent) for `host`. A CA file without
        /// `sslmode` means `verify-full`; with `disable` or `require` it is refused (it would be ignored).
        static func parse(sslmode: String?, sslrootcert: String?, host: String) throws -> TLSMode {
            switch (sslmode, sslrootcert) {
            case (nil, nil): return .default(host: host)
            case (nil, let file?): return .verifyFull(rootCertificates: file)
            case ("verify-full", let file): return .verifyFull(rootCertificates: file)
            case ("disable", nil): return .disable
            case ("require", nil): return .require
            case ("disable", _?), ("require", _?):
                throw StoreError.invalidArgument("sslrootcert needs sslmode=verify-full (got \(sslmode ?? ""))")
            default:
                throw StoreError.invalidArgument(
                    "sslmode must be disable, require or verify-full (got \(sslmode ?? "nothing"))"
                )
            }
        }

        /// The client's TLS configuration, nil for `.disable`.
        func clientConfiguration() -> TLSConfiguration? {
            var tls = TLSConfiguration.makeClientConfiguration()
            switch self {
            case .disable: return nil
            case .require: tls.certificateVerification = .none
            case .verifyFull(let file):
                tls.certificateVerification = .fullVerification
                if let file { tls.trustRoots = .file(file) }
            }
            return tls
        }
    }
}
