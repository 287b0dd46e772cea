import ArgumentParser
import Foundation
import Glibc
import WebPush

/// `pushgate webpush`: Web Push tools.
struct WebPushCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webpush",
        abstract: "Web Push tools.",
        subcommands: [GenerateVAPIDKeyCommand.self]
    )
}

/// `pushgate webpush generate-vapid-key`: a fresh VAPID key pair (RFC 8292), P-256.
struct GenerateVAPIDKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate-vapid-key",
        abstract: "Make a VAPID key (P-256): the private key as PEM, the public key as base64url.",
        discussion: """
            With --out, the private key (PKCS#8 PEM) is written to a new file readable by its owner only \
            (0600; an existing file is never replaced) and the public key is printed on standard output. \
            Without --out, the PEM goes to standard output and the public key to standard error. The public \
            key is the applicationServerKey a web page passes to pushManager.subscribe().
            """
    )

    @Option(help: "Write the private key (PEM) to this new file, mode 0600.")
    var out: String?

    func run() throws {
        let key = VAPIDKey.generate()
        guard let out else {
            FileHandle.standardOutput.write(Data(key.pemRepresentation.utf8))
            FileHandle.standardError.write(Data("public key (applicationServerKey): \(key.publicKeyBase64URL)\n".utf8))
            return
        }
        try Self.writeNewPrivateFile(Array(key.pemRepresentation.utf8), to: out)
        print(key.publicKeyBase64URL)
    }

    /// Creates `path` with mode 0600 (O_EXCL: never an existing file, never a moment with wider
    /// permissions) and writes `bytes`; a partial file is removed.
    static func writeNewPrivateFile(_ bytes: [UInt8], to path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            let reason = errno == EEXIST ? "it exists (a key is never replaced)" : String(cString: strerror(errno))
            throw KeyFileError(description: "--out: cannot create \(path): \(reason)")
        }
        var written = 0
        var failure: Int32 = 0
        bytes.withUnsafeBytes { buffer in
            while written < buffer.count {
                let result = Glibc.write(descriptor, buffer.baseAddress! + written, buffer.count - written)
                if result < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                written += result
            }
        }
        if failure == 0, fsync(descriptor) != 0 { failure = errno }
        close(descriptor)
        if failure != 0 {
            unlink(path)
            throw KeyFileError(description: "--out: cannot write \(path): \(String(cString: strerror(failure)))")
        }
    }
}

/// The key file could not be made (printed by ArgumentParser as `Error: ...`, without the usage text).
struct KeyFileError: Error, CustomStringConvertible {
    let description: String
}
