# fish completion for podscopectl(1)

function __podscopectl_ids
    podscopectl list --quiet 2>/dev/null | string sub --length 12
end

function __podscopectl_ctr_ids
    podscopectl ps -a --quiet 2>/dev/null | string sub --length 12
end

set -l cmds list status create start stop rm remove wait update info journal pull images inspecti rmi imagefsinfo container ps inspect logs exec attach help
set -l verbs create start stop rm remove update
complete -c podscopectl -f
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -l no-ask-password -d 'do not let polkit ask for a password'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -s V -l version -d 'print the version'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -s h -l help -d 'print the usage'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a list -d 'list sandboxes'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a status -d 'show one sandbox'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a create -d 'create a sandbox'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a start -d 'start sandboxes'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a stop -d 'stop sandboxes'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a rm -d 'remove sandboxes'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a remove -d 'remove sandboxes (rm)'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a wait -d 'wait until a sandbox stops'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a update -d "set a sandbox's resources"
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a info -d 'runtime version, platform, readiness and recovery findings'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a journal -d 'the journal of a sandbox or container'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a pull -d 'pull an image'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a images -d 'list images'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a inspecti -d 'show one image as JSON'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a rmi -d 'remove images'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a imagefsinfo -d 'the image store disk use'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a container -d 'create, start, stop, remove or update containers'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a ps -d 'list containers'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a inspect -d 'show one container as JSON'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a logs -d "print a container's output"
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a exec -d 'run a command in a running container'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a attach -d "join a running container's streams"
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a help -d 'print the usage'

# Sandboxes.
complete -c podscopectl -n "__fish_seen_subcommand_from status start stop rm remove wait update; and not __fish_seen_subcommand_from container" -a '(__podscopectl_ids)'
complete -c podscopectl -n "__fish_seen_subcommand_from list" -l state -x -a 'created ready notready' -d 'only sandboxes in this state'
complete -c podscopectl -n "__fish_seen_subcommand_from list" -l label -x -d 'only sandboxes with this label (K=V)'
complete -c podscopectl -n "__fish_seen_subcommand_from list" -s q -l quiet -d 'full ids only'
complete -c podscopectl -n "__fish_seen_subcommand_from update; and not __fish_seen_subcommand_from container" -l memory -x -d 'memory limit in bytes'
complete -c podscopectl -n "__fish_seen_subcommand_from update; and not __fish_seen_subcommand_from container" -l cpu-quota -x -d 'CPU quota in microseconds'
complete -c podscopectl -n "__fish_seen_subcommand_from update; and not __fish_seen_subcommand_from container" -l cpu-period -x -d 'CPU period in microseconds'
complete -c podscopectl -n "__fish_seen_subcommand_from update; and not __fish_seen_subcommand_from container" -l cpu-shares -x -d 'CPU shares'
complete -c podscopectl -n "__fish_seen_subcommand_from update; and not __fish_seen_subcommand_from container" -l pids-limit -x -d 'maximum number of tasks'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l namespace -x -d 'Kubernetes namespace'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l uid -x -d 'pod UID'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l attempt -x -d 'attempt number'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l hostname -x -d 'hostname inside the pod'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l label -x -d 'label (K=V)'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l annotation -x -d 'annotation (K=V)'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l cgroup-parent -x -d 'slice of the scope'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l runtime-handler -x -d 'runtime handler'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l memory -x -d 'memory limit in bytes'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l cpu-quota -x -d 'CPU quota in microseconds'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l cpu-period -x -d 'CPU period in microseconds'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l cpu-shares -x -d 'CPU shares'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l pids-limit -x -d 'maximum number of tasks'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l port -x -d 'port mapping HOST:CONTAINER[/PROTO]'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l dns-server -x -d 'DNS server'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l dns-search -x -d 'DNS search domain'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l dns-option -x -d 'resolv.conf option'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l sysctl -x -d 'namespaced sysctl (K=V)'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l pid-namespace -x -a 'pod container node' -d 'PID namespace mode'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l log-directory -r -a '(__fish_complete_directories)' -d 'log directory'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l host-network -d 'use the host network'
complete -c podscopectl -n "__fish_seen_subcommand_from create; and not __fish_seen_subcommand_from container" -l start -d 'start the sandbox too'
complete -c podscopectl -n "__fish_seen_subcommand_from pull" -l creds -x -d 'registry credentials USER[:PASSWORD]'
complete -c podscopectl -n "__fish_seen_subcommand_from pull" -l auth -x -d 'registry auth (base64 USER:PASSWORD)'
complete -c podscopectl -n "__fish_seen_subcommand_from pull" -l registry-token -x -d 'registry bearer token'
complete -c podscopectl -n "__fish_seen_subcommand_from images" -s q -l quiet -d 'ids only'

# journal: a sandbox or container, then journalctl's options.
complete -c podscopectl -n "__fish_seen_subcommand_from journal" -a '(__podscopectl_ids) (__podscopectl_ctr_ids)'
complete -c podscopectl -n "__fish_seen_subcommand_from journal" -s f -l follow -d 'follow the journal'
complete -c podscopectl -n "__fish_seen_subcommand_from journal" -s n -l lines -x -d 'the last N entries'
complete -c podscopectl -n "__fish_seen_subcommand_from journal" -s o -l output -x -a 'short short-iso short-precise verbose json json-pretty cat' -d 'output format'
complete -c podscopectl -n "__fish_seen_subcommand_from journal" -s p -l priority -x -a 'emerg alert crit err warning notice info debug' -d 'priority'
complete -c podscopectl -n "__fish_seen_subcommand_from journal" -s r -l reverse -d 'newest first'
complete -c podscopectl -n "__fish_seen_subcommand_from journal" -s g -l grep -x -d 'messages matching'
complete -c podscopectl -n "__fish_seen_subcommand_from journal" -l since -x -d 'entries since'
complete -c podscopectl -n "__fish_seen_subcommand_from journal" -l until -x -d 'entries until'
complete -c podscopectl -n "__fish_seen_subcommand_from journal" -l no-pager -d 'do not pipe into a pager'

# Containers.
complete -c podscopectl -n "__fish_seen_subcommand_from container; and not __fish_seen_subcommand_from $verbs" -a create -d 'create a container'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and not __fish_seen_subcommand_from $verbs" -a start -d 'start containers'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and not __fish_seen_subcommand_from $verbs" -a stop -d 'stop containers'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and not __fish_seen_subcommand_from $verbs" -a rm -d 'remove containers'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and not __fish_seen_subcommand_from $verbs" -a remove -d 'remove containers (rm)'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and not __fish_seen_subcommand_from $verbs" -a update -d "set a container's resources"
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from start stop rm remove update" -a '(__podscopectl_ctr_ids)'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from stop" -s t -l timeout -x -d 'grace period in seconds'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -a '(__podscopectl_ids)'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -s e -l env -x -d 'environment variable (K=V)'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -s w -l workdir -x -d 'working directory'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -s u -l user -x -d 'user (UID or name)'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l mount -r -d 'bind a host path HOST:CONTAINER[:ro|:rro]'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l label -x -d 'label (K=V)'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l log-path -x -d "log file in the pod's log directory"
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l privileged -d 'privileged container'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l read-only -d 'read-only root'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l cap-add -x -d 'add a capability'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l cap-drop -x -d 'drop a capability'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -s t -l tty -d 'allocate a terminal'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -s i -l stdin -d 'keep stdin open'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l memory -x -d 'memory limit in bytes'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l cpu-quota -x -d 'CPU quota in microseconds'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l cpu-period -x -d 'CPU period in microseconds'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l cpu-shares -x -d 'CPU shares'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l cpuset-cpus -x -d 'CPUs'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l attempt -x -d 'attempt number'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from create" -l start -d 'start the container too'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from update" -l memory -x -d 'memory limit in bytes'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from update" -l cpu-quota -x -d 'CPU quota in microseconds'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from update" -l cpu-period -x -d 'CPU period in microseconds'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from update" -l cpu-shares -x -d 'CPU shares'
complete -c podscopectl -n "__fish_seen_subcommand_from container; and __fish_seen_subcommand_from update" -l cpuset-cpus -x -d 'CPUs'
complete -c podscopectl -n "__fish_seen_subcommand_from inspect logs exec attach" -a '(__podscopectl_ctr_ids)'
complete -c podscopectl -n "__fish_seen_subcommand_from exec attach" -s i -l interactive -d 'with this stdin'
complete -c podscopectl -n "__fish_seen_subcommand_from exec" -s t -l tty -d 'on a terminal'
complete -c podscopectl -n "__fish_seen_subcommand_from attach" -s t -l tty -d "taken for kubectl's -it; the container decides"
complete -c podscopectl -n "__fish_seen_subcommand_from exec" -l timeout -x -d 'seconds before the command is killed'
complete -c podscopectl -n "__fish_seen_subcommand_from logs" -s f -l follow -d 'follow the output'
complete -c podscopectl -n "__fish_seen_subcommand_from ps" -s a -l all -d 'all containers, not only running ones'
complete -c podscopectl -n "__fish_seen_subcommand_from ps" -s p -l pod -x -a '(__podscopectl_ids)' -d "only this sandbox's containers"
complete -c podscopectl -n "__fish_seen_subcommand_from ps" -l state -x -a 'created running exited unknown' -d 'only containers in this state'
complete -c podscopectl -n "__fish_seen_subcommand_from ps" -l label -x -d 'only containers with this label (K=V)'
complete -c podscopectl -n "__fish_seen_subcommand_from ps" -s q -l quiet -d 'full ids only'
