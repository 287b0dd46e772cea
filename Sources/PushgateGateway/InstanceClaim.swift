import Foundation
package import Logging
package import PushgateCore
import ServiceLifecycle

/// Keeps this process's instance id to itself while the work under it runs (PostgreSQL, where several
/// processes share one database): claims the id before `work` starts (and so before the dispatcher
/// releases "its own" leases), renews the claim every third of its time to live while `work` runs,
/// and releases it when `work` ends.
///
/// A claim another holder keeps renewing is refused (``Gateway/StartupError``, exit 78). A claim left
/// by a process that stopped renewing (killed with the same explicit id) is waited out: it lapses at
/// most one time to live after its last renewal, and is then taken over.
package struct InstanceClaim: Service {
    let leases: any InstanceLeases
    let id: InstanceID
    /// Unique to this process: a restart is another holder.
    let holder: String
    let timeToLive: Duration
    let clock: any WallClock
    let sleep: @Sendable (Duration) async throws -> Void
    let logger: Logger
    /// Called once the id is this process's, before `work` starts (readiness waits for it).
    let onClaimed: @Sendable () async -> Void
    /// What runs under the id (the dispatcher and the intake).
    let work: @Sendable () async throws -> Void

    package init(
        leases: any InstanceLeases,
        id: InstanceID,
        holder: String = UUID().uuidString,
        timeToLive: Duration,
        clock: any WallClock,
        logger: Logger,
        onClaimed: @escaping @Sendable () async -> Void = {},
        work: @escaping @Sendable () async throws -> Void,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) {
        self.leases = leases
        self.id = id
        self.holder = holder
        self.timeToLive = timeToLive
        self.clock = clock
        self.sleep = sleep
        self.logger = logger
        self.onClaimed = onClaimed
        self.work = work
    }

    package func run() async throws {
        try await claim()
        await onClaimed()
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await work() }
                group.addTask { try await renewWhileRunning() }
                try await group.next()
                group.cancelAll()
            }
        } catch {
            try? await leases.releaseInstance(id, holder: holder)
            throw error
        }
        // Released on a graceful stop, so that a restart with the same id claims it at once.
        try? await leases.releaseInstance(id, holder: holder)
    }

    /// Claims the id, waiting out a holder that may have stopped renewing for up to one time to live.
    func claim() async throws {
        let retry = timeToLive / 5
        var deadline: Date? = nil
        while true {
            let attempt = clock.now()
            do {
                try await leases.claimInstance(id, holder: holder, now: attempt, timeToLive: timeToLive)
                if deadline != nil { logger.info("instance id taken over", metadata: ["push.instance": "\(id)"]) }
                return
            } catch let error as StoreError where error.code == .instanceIDInUse {
                guard let until = deadline else {
                    deadline = attempt.addingTimeInterval(timeToLive.seconds)
                    logger.info(
                        "instance id held by another process; waiting for its claim to lapse",
                        metadata: ["push.instance": "\(id)", "push.wait_seconds": "\(timeToLive.seconds)"]
                    )
                    try await sleep(retry)
                    continue
                }
                // A holder that stopped renewing before `deadline` was set has lapsed by then.
                guard attempt < until else {
                    throw Gateway.StartupError(
                        description: "--instance-id: \(id) is in use by another live process (it kept renewing its "
                            + "claim for \(timeToLive)); give each instance its own id, or leave it unset"
                    )
                }
                try await sleep(retry)
            } catch let error as Gateway.StartupError {
                throw error
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                logger.warning(
                    "cannot claim the instance id yet",
                    metadata: ["push.instance": "\(id)", "error": "\(error)"]
                )
                try await sleep(retry)
            }
        }
    }

    /// Renews the claim until cancelled. Another holder having taken the id over (this process stopped
    /// renewing for longer than the time to live) ends the gateway: two processes would share leases.
    func renewWhileRunning() async throws {
        while true {
            try await sleep(timeToLive / 3)
            do {
                try await leases.renewInstance(id, holder: holder, now: clock.now(), timeToLive: timeToLive)
            } catch let error as StoreError where error.code == .instanceIDInUse {
                logger.error(
                    "instance id taken over by another process; stopping",
                    metadata: ["push.instance": "\(id)"]
                )
                throw Gateway.StartupError(description: "--instance-id: \(id) was taken over by another process")
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                logger.warning(
                    "cannot renew the instance id",
                    metadata: ["push.instance": "\(id)", "error": "\(error)"]
                )
            }
        }
    }
}

extension Duration {
    fileprivate var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
