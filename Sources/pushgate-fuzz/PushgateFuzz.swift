#if FUZZING
import Foundation
import FuzzEntryPoints

/// libFuzzer's entry point (`scripts/fuzz.sh` builds this file with `-D FUZZING` and `--sanitize fuzzer`;
/// SwiftPM then links libFuzzer's own `main`, so there is no `@main` here). The target is named by
/// `PUSHGATE_FUZZ_TARGET`; a broken invariant traps, which libFuzzer reports as a crash and saves the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
    do {
        try FuzzDriver.target.run(input)
    } catch {
        fatalError("\(error)")
    }
    return 0
}

enum FuzzDriver {
    static let target: FuzzTarget = {
        let name = ProcessInfo.processInfo.environment["PUSHGATE_FUZZ_TARGET"] ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            fatalError("PUSHGATE_FUZZ_TARGET must be one of: \(FuzzTarget.allCases.map(\.rawValue))")
        }
        return target
    }()
}
#else
/// Built without `-D FUZZING` (a plain `swift build`): no libFuzzer is linked, so this executable
/// only says how to fuzz.
@main
enum PushgateFuzz {
    static func main() {
        print("pushgate-fuzz runs under libFuzzer only: scripts/fuzz.sh TARGET SECONDS")
    }
}
#endif
