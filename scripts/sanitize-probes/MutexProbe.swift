// Does ThreadSanitizer see `Synchronization.Mutex` as synchronisation on this toolchain?
// Two threads each add 1 to a plain class field 100,000 times, only ever inside the lock.
// Run by `scripts/sanitize.sh mutex-probe`, once per lock:
//   `mutex`   Synchronization.Mutex
//   `pthread` a pthread mutex (NSLock), which ThreadSanitizer intercepts: the control.
// The final count is 200,000 with either lock (the lock does exclude); any ThreadSanitizer report on the
// field is therefore a missed happens-before edge, that is a false positive.
import Foundation
import Synchronization

final class Field: @unchecked Sendable { var value = 0 }

protocol Lock: Sendable { func locked(_ body: () -> Void) }

final class SynchronizationMutex: Lock {
    let mutex = Mutex(())
    func locked(_ body: () -> Void) { mutex.withLock { _ in body() } }
}

final class PthreadMutex: Lock, @unchecked Sendable {
    let lock = NSLock()
    func locked(_ body: () -> Void) { lock.lock(); body(); lock.unlock() }
}

let lock: any Lock = CommandLine.arguments.dropFirst().first == "pthread" ? PthreadMutex() : SynchronizationMutex()
let field = Field()
let done = DispatchGroup()
for _ in 0..<2 {
    done.enter()
    Thread {
        for _ in 0..<100_000 { lock.locked { field.value += 1 } }
        done.leave()
    }.start()
}
done.wait()
lock.locked { print("count \(field.value) (expected 200000)") }
