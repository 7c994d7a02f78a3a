-- Screenshots of what mpv rendered (the window, so through the GPU path) at
-- fixed times, then quit. mpv starts paused at --start (the first shot);
-- each later shot follows an exact seek. Only restarts we caused count, so
-- the shots do not depend on timing.
local times = {1.0, 2.0}
local dir = os.getenv("SHOT_DIR") or "."
local shot = 1
local expecting = true -- the restart after --start
mp.register_event("playback-restart", function()
  if not expecting then return end
  expecting = false
  mp.commandv("screenshot-to-file", string.format("%s/shot%d.png", dir, shot), "window")
  if shot > #times then
    mp.command("quit")
    return
  end
  expecting = true
  mp.commandv("seek", tostring(times[shot]), "absolute+exact")
  shot = shot + 1
end)
