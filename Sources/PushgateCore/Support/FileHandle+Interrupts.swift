package import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension FileHandle {
    /// Reads until end of file, retrying reads that a signal interrupted. Foundation's
    /// `readDataToEndOfFile()` and `availableData` trap on EINTR (a `try!` inside them), which took a
    /// whole test process down once a child process's signal arrived mid-read.
    package func readToEndRetryingInterrupts() -> Data {
        var data = Data()
        while let chunk = readAvailableRetryingInterrupts(), !chunk.isEmpty {
            data.append(chunk)
        }
        return data
    }

    /// One read of what is there (blocking until something is): empty at end of file, nil on an error
    /// other than EINTR. For `readabilityHandler`, in place of `availableData`.
    package func readAvailableRetryingInterrupts() -> Data? {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fileDescriptor, $0.baseAddress, $0.count) }
            if count >= 0 { return Data(buffer[0..<count]) }
            if errno != EINTR { return nil }
        }
    }
}

extension FileHandle {
    /// Hands each chunk read to `receive` on a thread of its own until end of file (or a read error),
    /// with plain blocking reads. In place of `readabilityHandler`, whose dispatch source crashed a test
    /// process in libdispatch's event loop, and whose `availableData` traps on EINTR.
    /// `onEnd` runs once the reads are over (end of file or an error): after it, nothing more arrives.
    package func readChunksInBackground(
        _ receive: @escaping @Sendable (Data) -> Void,
        onEnd: @escaping @Sendable () -> Void = {}
    ) {
        let thread = Thread { [self] in
            while let chunk = readAvailableRetryingInterrupts(), !chunk.isEmpty { receive(chunk) }
            onEnd()
        }
        thread.start()
    }
}
