-- Argo CD health of an Express Backend or Frontend (express.medallia.com),
-- read from the PrerequisitesReady condition express-sequencer writes:
--   Healthy      the node's rollout is complete for its current generation,
--                or the node is intentionally down (up: false)
--   Progressing  gated, waiting its turn, a change landing, rolling out,
--                recovering — or the sequencer has not looked at this
--                generation yet
--   Suspended    paused (express.medallia.com/pause-rollout), here or on a
--                node it waits for
--   Degraded     a dependency cycle, a missing prerequisite, or a rollout
--                past its progress deadline
--   (audit mode: what enforcing would hold, WouldHold, is Healthy — nothing
--   holds the node)
-- It uses only Lua's base and table libraries, the ones Argo CD opens for a
-- health check from argocd-cm.
local hs = {}

if obj.spec ~= nil and obj.spec.up == false then
  hs.status = "Healthy"
  hs.message = "intentionally down (up: false)"
  return hs
end

local cond = nil
if obj.status ~= nil and obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "PrerequisitesReady" then
      cond = c
    end
  end
end

local gated = false
if obj.spec ~= nil and obj.spec.rolloutGates ~= nil then
  for _, g in ipairs(obj.spec.rolloutGates) do
    if g.name == "express.medallia.com/sequencer" then
      gated = true
    end
  end
end

if cond == nil then
  hs.status = "Progressing"
  if gated then
    hs.message = "gated: waiting for express-sequencer to release it"
  else
    hs.message = "waiting for express-sequencer to report on it"
  end
  return hs
end

local message = cond.reason
if cond.message ~= nil and cond.message ~= "" then
  message = cond.reason .. ": " .. cond.message
end

local generation = obj.metadata.generation
if generation ~= nil and (cond.observedGeneration == nil or cond.observedGeneration < generation) then
  hs.status = "Progressing"
  hs.message = "waiting for express-sequencer to look at generation " .. generation .. " (last seen: " .. message .. ")"
  return hs
end

local degraded = { DependencyCycle = true, PrerequisiteNotFound = true, PrerequisitePinUnreachable = true, ProgressDeadlineExceeded = true, NameShared = true }
if degraded[cond.reason] then
  hs.status = "Degraded"
elseif cond.reason == "RolloutPaused" then
  hs.status = "Suspended"
elseif cond.reason == "WouldHold" then
  -- Audit mode: nothing holds the node; the sequencer only says what
  -- enforcing would hold.
  hs.status = "Healthy"
  message = "audit mode, nothing holds it: " .. message
elseif (cond.reason == "RolloutComplete" or cond.reason == "NodeDown") and not gated then
  hs.status = "Healthy"
else
  hs.status = "Progressing"
end
hs.message = message
return hs
