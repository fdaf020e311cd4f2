// Routing policies: which replica, among those that may take a request now
// (breaker admits, not draining, not yet tried by this request), gets it.
//
//   round-robin  the next in turn
//   least-load   power of two choices (Mitzenmacher, "The Power of Two
//                Choices in Randomized Load Balancing", 2001): two distinct
//                candidates drawn at random, the lower load score wins
//                (load_state.h); the spread of one random choice without the
//                herding of always taking the minimum of stale scores
//   prefix       the replica that served the longest known prefix of the
//                prompt (prefix_affinity.h), unless its score exceeds the
//                least-loaded candidate's by more than `prefix_threshold`;
//                otherwise (or with no match) the replica, among those
//                within 1 of the least load, that holds the fewest known
//                prefix blocks (so new prefixes, and the replicas' prefix
//                caches, spread evenly), and the prefix is then recorded
//                for it
// Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gateway/prefix_affinity.h"

namespace nexus::gateway {

enum class PolicyKind { LeastLoad, Prefix, RoundRobin };
std::optional<PolicyKind> policy_from_name(const std::string& name);  // "least-load", "prefix", "round-robin"
const char* policy_name(PolicyKind p);

struct Candidate {
  size_t replica;  // index into the gateway's replica list
  double score;    // LoadState::score()
};

// How the prefix policy decided (metrics); None for the other policies.
enum class AffinityResult { None, Hit, Miss, Overflow };
const char* affinity_result_name(AffinityResult r);  // "hit", "miss", "overflow"

struct RouteDecision {
  size_t replica;
  AffinityResult affinity = AffinityResult::None;
};

class Router {
 public:
  Router(PolicyKind policy, double prefix_threshold) : policy_(policy), prefix_threshold_(prefix_threshold) {}
  // `candidates` non-empty; `prefix_hashes` from prefix_block_hashes() (may be empty).
  RouteDecision choose(const std::vector<Candidate>& candidates, const std::vector<uint64_t>& prefix_hashes);
  PolicyKind policy() const { return policy_; }

 private:
  size_t two_choices(const std::vector<Candidate>& candidates);  // index into candidates
  size_t fewest_prefixes(const std::vector<Candidate>& candidates, double min_score);  // a replica

  PolicyKind policy_;
  double prefix_threshold_;
  std::atomic<uint64_t> next_{0};
  std::mutex rng_mu_;
  std::mt19937_64 rng_{0x6e657875};
  PrefixAffinity affinity_;
};

}  // namespace nexus::gateway
