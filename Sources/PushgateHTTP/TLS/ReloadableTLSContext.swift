import Foundation
import NIOSSL
public import PushgateCore
import Synchronization

/// The API's current TLS context, which a reload replaces. Each new connection reads it once, when it is
/// accepted (``ReloadableTLSChannel``): after ``reload()`` new connections get the renewed certificate,
/// while those already open keep the one they started with. A reload that fails changes nothing.
public final class ReloadableTLSContext: Sendable {
    public let files: HTTPTLSFiles
    private let clock: any WallClock
    private let current: Mutex<HTTPTLSIdentity>

    /// Reads the files (``HTTPTLSFiles/load(now:)``); `clock` judges the certificate's expiry, now and at
    /// each reload.
    public init(files: HTTPTLSFiles, clock: any WallClock = SystemWallClock()) throws(HTTPTLSError) {
        self.files = files
        self.clock = clock
        self.current = Mutex(try files.load(now: clock.now()))
    }

    /// What new connections are served with.
    public var identity: HTTPTLSIdentity { current.withLock { $0 } }

    var context: NIOSSLContext { current.withLock { $0.context } }

    /// Reads the files again and, when every check passes, serves new connections with them. On a problem
    /// the previous certificate stays in use and the problem is thrown.
    @discardableResult
    public func reload() throws(HTTPTLSError) -> HTTPTLSIdentity {
        // Read and checked outside the lock: accepting connections never waits for the disk.
        let loaded = try files.load(now: clock.now())
        install(loaded)
        return loaded
    }

    /// Serves new connections with `identity`, read and checked elsewhere (a reload of the whole
    /// configuration reads every file before it applies any).
    public func install(_ identity: HTTPTLSIdentity) {
        current.withLock { $0 = identity }
    }
}
