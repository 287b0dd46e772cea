#if FUZZING
import Foundation
import FuzzEntryPoints

/// libFuzzer's driver (`scripts/fuzz.sh` builds this file with `-D FUZZING` and `--sanitize fuzzer`).
/// SwiftPM links every executable's `main` to its `@main`, so `main` starts libFuzzer's driver itself
/// (`LLVMFuzzerRunDriver`) instead of libFuzzer's own `main`.
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

@main
enum PushgateFuzz {
    /// Named by `PUSHGATE_FUZZ_TARGET`.
    static let target: FuzzTarget = {
        let name = ProcessInfo.processInfo.environment["PUSHGATE_FUZZ_TARGET"] ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            fatalError("PUSHGATE_FUZZ_TARGET must be one of: \(FuzzTarget.allCases.map(\.rawValue))")
        }
        return target
    }()

    static func main() {
        _ = target
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(runFuzzerDriver(&argc, &argv, testOneInput))
    }

    /// One input; a broken invariant traps, which libFuzzer reports as a crash and saves the input.
    static let testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt = { data, size in
        let input = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
        do {
            try PushgateFuzz.target.run(input)
        } catch {
            fatalError("\(error)")
        }
        return 0
    }
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
